package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.Probe;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.BudgetedRuns;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Corpus families ({@link Corpus.Size#TEST}) under a real budget (a worker JVM under the BFC
 * limit) at which the unmodified graph runs out of memory: each lms4j mode that can plan there
 * trains 3 steps with losses bit-identical to the unbudgeted run's, and the rewrites before
 * planning ({@code GradientSums}, {@code OptimizerEdges}) are what make the RNN plannable, and
 * {@code SparseUpdates} what lets a dense embedding update train below TensorFlow's minimum.
 *
 * <p>Only non-convolutional families carry budgeted assertions: without AVX-512, oneDNN's
 * convolution gradients take scratch memory the simulator does not model (issue 15), so the
 * U-Net is measured by the benchmark instead ({@code docs/bench/corpus-i14.md}).
 *
 * <p>Budgets (the simulator's figures, memory ratio 0.8, measured on this machine):
 * <ul>
 *   <li>lstm (batch 8, 24 steps, hidden 128, 2 layers): the unbudgeted step peaks at 20.1 MiB
 *       (traced), set by the two 24-input gradient AddNs of the shared kernels (24 x 320 KiB
 *       each, all alive until the last arrives). As running accumulations the simulated peak is
 *       4.79 MiB. At 5 MiB (limit 4.0 MiB) the planners must still plan on top of that: tflms,
 *       swap and auto reach 4.46 MiB budgets; recomputation alone only 5.83 MiB (it can lower
 *       the simulated peak from 4.79 to 4.66 MiB), so remat says so at that ratio; at 0.95
 *       (where 0.8 is refused) the accumulations alone are its plan, and train. Without the rewrites every
 *       mode refuses anything below 24 MiB.</li>
 *   <li>encoder (batch 4, seq 64, width 64, 2 layers, vocabulary 2000, framework Adam): the
 *       unbudgeted peak is 14.6 MiB; weights, Adam's slots and the largest op (softmax over the
 *       vocabulary) set a floor of about 10 MiB, so swapping plans down to a 12.5 MiB budget and
 *       recomputation alone not below 14.6 MiB. At 13 MiB: no-LMS runs out of memory, auto,
 *       swap and tflms train; remat at memory ratio 0.8 says it cannot (naming the smallest
 *       budget), and at the default (0.95 where 0.8 is refused) trains.</li>
 * </ul>
 *
 * <p>Known deviation, reason named: on the encoder at 13 MiB, auto's hybrid plan (21 swaps,
 * 10 recomputed element-wise ops of the layer norms and the tanh-GELU) moves the second loss by
 * about 1e-7 relative (8.471007347106934 instead of 8.47100830078125): grappler's arithmetic
 * optimizer reassociates the GELU's product {@code (x * x) * c} once the recomputed
 * {@code x * x} has one reader left; with arithmetic optimization off the losses are identical
 * ({@link RecomputeRoundingTest}). It is checked to 1e-6 relative here.
 */
class CorpusUnderBudgetTest {
  private static final long MIB = 1 << 20;
  private static final int STEPS = 3;

  @Test
  void lstmTrainsInEveryModeWhereNoLmsRunsOutOfMemory() throws Exception {
    TrainingGraph tg = Corpus.Family.LSTM.build(Corpus.Size.TEST, 42);
    long budget = 5 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertOom(tg, budget);
    assertThatThrownBy(() -> Lms.builder().budget(budget).mode(LmsMode.REMAT)
        .slotOffload(false).memRatio(0.8).build()
        .rewrite(tg)).isInstanceOf(PlanningException.class)
        .hasMessageContaining("smallest budget");
    // at the default ratio, refused at 0.8, remat at 0.95 keeps the running accumulations
    // alone (4.3 MiB simulated, accepted by the allocator check) and trains (measured
    // 2026-12-06: traced 3.7 MiB, the unbudgeted losses bit for bit)
    LmsResult remat = Lms.builder().budget(budget).mode(LmsMode.REMAT).slotOffload(false)
        .build().rewrite(tg);
    assertThat(remat.preRewrites().gradientSums()).isEqualTo(2);
    BudgetedRuns.assertTrainsLikeTheReference("remat", remat, tg, budget, reference);
    for (LmsMode mode : List.of(LmsMode.AUTO, LmsMode.SWAP, LmsMode.TFLMS)) {
      LmsResult lr = Lms.builder().budget(budget).mode(mode).build().rewrite(tg);
      assertThat(lr.preRewrites().gradientSums()).as(mode.cliName()).isEqualTo(2);
      // the planner itself planned, beyond the running accumulations
      assertThat(lr.memoryPlan().needed()).as(mode.cliName()).isTrue();
      assertThat(lr.predictedPeakAfter()).as(mode.cliName())
          .isLessThanOrEqualTo((long) (budget * 0.8));
      BudgetedRuns.assertTrainsLikeTheReference(mode.cliName(), lr, tg, budget, reference);
    }
    // without the rewrites, the n-input sums set a floor above this budget
    assertThatThrownBy(() -> Lms.builder().budget(budget).mode(LmsMode.AUTO).gradientSums(false)
        .optimizerEdges(false).slotOffload(false).build().rewrite(tg))
        .isInstanceOf(PlanningException.class);
  }

  @Test
  void encoderWithFrameworkAdamTrainsWhereNoLmsRunsOutOfMemory() throws Exception {
    TrainingGraph tg = Corpus.Family.ENCODER.build(Corpus.Size.TEST, 42);
    long budget = 13 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertOom(tg, budget);
    for (LmsMode mode : List.of(LmsMode.AUTO, LmsMode.SWAP, LmsMode.TFLMS)) {
      LmsResult lr = Lms.builder().budget(budget).mode(mode).build().rewrite(tg);
      assertThat(lr.preRewrites().optimizerEdgesRemoved()).as(mode.cliName()).isPositive();
      assertThat(lr.memoryPlan().needed()).as(mode.cliName()).isTrue();
      if (mode == LmsMode.AUTO) {
        BudgetedRuns.assertTrainsCloseToTheReference(mode.cliName(), lr, tg, budget, reference, 1e-6);
      } else {
        BudgetedRuns.assertTrainsLikeTheReference(mode.cliName(), lr, tg, budget, reference);
      }
    }
    assertThatThrownBy(() -> Lms.builder().budget(budget).mode(LmsMode.REMAT)
        .slotOffload(false).memRatio(0.8).build()
        .rewrite(tg)).isInstanceOf(PlanningException.class)
        .hasMessageContaining("smallest budget");
    // at the default ratio, refused at 0.8, remat plans at 0.95 (grappler-style recomputation,
    // 10.8 MiB simulated, the replay about 13 MiB, kept with the check's warning) and trains
    // (measured 2026-12-06: traced 11.5 MiB, the unbudgeted losses bit for bit)
    LmsResult remat = Lms.builder().budget(budget).mode(LmsMode.REMAT).slotOffload(false)
        .build().rewrite(tg);
    assertThat(remat.memoryPlan().needed()).isTrue();
    BudgetedRuns.assertTrainsCloseToTheReference("remat", remat, tg, budget, reference, 1e-6);
  }

  /**
   * A plan is accepted only where its chunks leave the allocator check's headroom under the
   * whole budget. The encoder at bench size (framework Adam, a 15.6 MiB logits tensor): at 58
   * MiB swap's hybrid plan (46.3 MiB simulated) fitted the replay under 55 MiB, the headroom's
   * limit, and held 57.3 MiB of chunks under 58; TensorFlow ran out of memory at 58 allocating
   * 512 KiB in {@code gradients/Div_5}, with 57.5 MiB of chunks in use, the logits holding a
   * 27.5 MiB chunk of the last region whole (measured 2026-12-06; the plans for 55 and 61 MiB
   * failed the same way). Now it is planned again, and the plan the check accepts trains with the
   * unbudgeted losses.
   */
  @Test
  void aPlanWhoseChunksFillTheBudgetIsPlannedAgainAndTrains() throws Exception {
    TrainingGraph tg = Corpus.Family.ENCODER.build(Corpus.Size.BENCH, 42);
    long budget = 58 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, 2);
    LmsResult lr = Lms.builder().budget(budget).mode(LmsMode.SWAP).build().rewrite(tg);
    assertThat(lr.memoryPlan().needed()).isTrue();
    BudgetedRuns.assertTrainsLikeTheReference("swap", lr, tg, budget, reference);
  }

  /**
   * Where none of auto's plans fits the allocator replay, the other modes' plans are replayed
   * too and the closest is taken. The DenseNet at bench size (framework Momentum) at 28 MiB:
   * auto's hybrid plans (21.9-22.1 MiB simulated) need about 30 MiB of the allocator, and the
   * one kept ran out of memory allocating 8 MiB in a swap-in's concat (measured 2026-12-06);
   * tflms's plan (21.9 MiB simulated) needs about 29, is kept instead, and trains with the
   * unbudgeted losses.
   */
  @Test
  void whereAutosPlansDoNotFitTheReplayAnotherModesPlanThatNeedsLessIsTakenAndTrains()
      throws Exception {
    assumeOneDnn();
    TrainingGraph tg = Corpus.Family.DENSENET.build(Corpus.Size.BENCH, 42);
    long budget = 28 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, 2);
    LmsResult lr = Lms.builder().budget(budget).mode(LmsMode.AUTO).build().rewrite(tg);
    assertThat(lr.memoryPlan().needed()).isTrue();
    assertThat(lr.planner()).isEqualTo("tflms-swap");
    BudgetedRuns.assertTrainsLikeTheReference("auto", lr, tg, budget, reference);
  }

  /**
   * The same DenseNet at 27 MiB: at memory ratio 0.8 no plan keeps the slots and weights on the
   * device; with the weights on the host too the plans need about 30 MiB of the allocator replay
   * (the one kept before this rule ran out of memory allocating 8 MiB in a swap-in, 2026-12-06),
   * while at ratio 0.95, with the weights on the device, tflms's closest plan needs about 28. The
   * plan that needs less is kept, and trains (measured peak 26.6 MiB): 0.36 of TensorFlow's 76
   * MiB without a probe.
   */
  @Test
  void whereNoPlanKeepsTheMarginThePlanAtRatio095ThatNeedsLessThanOffloadIsKeptAndTrains()
      throws Exception {
    assumeOneDnn();
    TrainingGraph tg = Corpus.Family.DENSENET.build(Corpus.Size.BENCH, 42);
    long budget = 27 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, 2);
    LmsResult lr = Lms.builder().budget(budget).mode(LmsMode.AUTO).build().rewrite(tg);
    assertThat(lr.memoryPlan().needed()).isTrue();
    assertThat(lr.preRewrites().offloadedWeights()).isZero();
    BudgetedRuns.assertTrainsLikeTheReference("auto", lr, tg, budget, reference);
  }

  /**
   * At a budget where TensorFlow trains the unmodified graph, {@code auto} plans; before the
   * rewrites it refused the lstm there. Measured with {@code run --lms off}: plain TensorFlow
   * trains this lstm at 23 MiB (2 of 2 runs) and runs out of memory at 21 MiB (2 of 2), although
   * its traced unbudgeted peak is 20.1 MiB (the allocator model says 22 MiB).
   */
  @Test
  void autoNeverRefusesWhereTensorFlowTrains() {
    TrainingGraph lstm = Corpus.Family.LSTM.build(Corpus.Size.TEST, 42);
    long tfTrains = 23 * MIB;
    assertThat(Lms.builder().budget(tfTrains).mode(LmsMode.AUTO).build().rewrite(lstm)
        .predictedPeakAfter()).isLessThanOrEqualTo((long) (tfTrains * 0.8));
    // without the running accumulations no plan keeps the margin there (the n-input sums set
    // the floor); the graph as given is predicted to fit the whole budget, so it is left as it
    // was rather than refused (NeverWorseTest), where before it was refused
    LmsResult plain = Lms.builder().budget(tfTrains).mode(LmsMode.AUTO).gradientSums(false)
        .build().rewrite(lstm);
    assertThat(plain.rewritten()).isFalse();
    assertThat(plain.graphDef()).isEqualTo(lstm.graphDef());
    assertThat(plain.predictedPeakBefore()).isLessThanOrEqualTo(tfTrains)
        .isGreaterThan((long) (tfTrains * 0.8));
    // at 21 MiB, where TensorFlow runs out of memory, the live bytes (20.1 MiB) still fit but
    // the allocator model does not: the graph as given is not taken; at memory ratio 0.8 no plan
    // keeps the margin, so with that ratio set the budget is refused, naming the allocator's need
    assertThatThrownBy(() -> Lms.builder().budget(21 * MIB).mode(LmsMode.AUTO)
        .gradientSums(false).slotOffload(false).memRatio(0.8).build().rewrite(lstm))
        .isInstanceOf(PlanningException.class)
        .hasMessageContaining("TensorFlow's allocator");
  }

  /**
   * Where no plan keeps the default memory ratio's margin, {@link Lms#rewrite} plans again at
   * ratio 0.95 and the allocator check judges. The lstm without its running accumulations at
   * 21 MiB, where the graph as given runs out of memory: before, the budget was refused; now
   * grappler-style recomputation's plan (19.1 MiB simulated; the replay needs about 21 MiB, so it
   * is kept with a warning) trains with the unbudgeted losses (measured 3 of 3, traced peak 19.2
   * MiB, 2026-12-06).
   */
  @Test
  void whereNoPlanKeepsTheDefaultMarginOneAtRatio095IsJudgedByTheAllocatorAndTrains()
      throws Exception {
    TrainingGraph lstm = Corpus.Family.LSTM.build(Corpus.Size.TEST, 42);
    long budget = 21 * MIB;
    assertOom(lstm, budget);
    double[] reference = BudgetedRuns.referenceLosses(lstm, 2);
    LmsResult lr = Lms.builder().budget(budget).mode(LmsMode.AUTO).gradientSums(false)
        .slotOffload(false).build().rewrite(lstm);
    assertThat(lr.memoryPlan().needed()).isTrue();
    assertThat(lr.predictedPeakAfter()).isGreaterThan((long) (budget * 0.8))
        .isLessThanOrEqualTo((long) (budget * 0.95));
    BudgetedRuns.assertTrainsLikeTheReference("auto at ratio 0.95", lr, lstm, budget, reference);
  }

  /**
   * The bound on a plan kept at ratio 0.95 that the allocator check did not accept: within the
   * check's 5% headroom above the budget (the lstm above, whose plan needs about 21 MiB at 21),
   * and no further. The corpus MLP with dropout (bench size; no convolutions, so the same on every
   * CPU) at 24 MiB, its weights on the device: with the optimizer's slots there too the resident
   * tensors alone need 38 MiB; with them on the host no plan keeps ratio 0.8's margin, and at
   * 0.95 the closest plan needs about 29 MiB of the allocator replay (measured 2026-12-07), more
   * than 24 x 1.05, so it is not kept and the budget is refused. A ratio of 0.95 set by hand is
   * taken as given: there the same closest plan is returned, with its warning. Planning only.
   */
  @Test
  void aPlanAtRatio095ThatNeedsMoreThanTheHeadroomAboveTheBudgetIsNotKept() {
    TrainingGraph tg = Corpus.Family.MLP_DROPOUT.build(Corpus.Size.BENCH, 42);
    long budget = 24 * MIB;
    ch.qos.logback.classic.Logger logger =
        (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(Lms.class);
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> log =
        new ch.qos.logback.core.read.ListAppender<>();
    log.start();
    logger.addAppender(log);
    try {
      assertThatThrownBy(() -> Lms.builder().budget(budget).mode(LmsMode.AUTO)
          .weightOffload(false).build().rewrite(tg)).isInstanceOf(PlanningException.class)
          .hasMessageContaining("smallest budget");
    } finally {
      logger.detachAppender(log);
    }
    java.util.regex.Pattern need = java.util.regex.Pattern.compile(
        "The closest plan at memory ratio 0\\.95 needs about (\\d+) MiB of the allocator, more "
        + "than the budget and its 5% headroom: not kept");
    List<Long> needs = log.list.stream().map(e -> need.matcher(e.getFormattedMessage()))
        .filter(java.util.regex.Matcher::find).map(m -> Long.parseLong(m.group(1))).toList();
    assertThat(needs).as("the plan at 0.95 the check did not keep").singleElement()
        .satisfies(mib -> assertThat(mib << 20).isGreaterThan(budget + budget / 20));
    LmsResult byHand = Lms.builder().budget(budget).mode(LmsMode.AUTO).memRatio(0.95)
        .weightOffload(false).build().rewrite(tg);
    assertThat(byHand.memoryPlan().needed()).isTrue();
    assertThat(byHand.preRewrites().offloadedSlots()).isPositive();
    assertThat(byHand.preRewrites().offloadedWeights()).isZero();
  }

  /**
   * The rewrites before planning change no loss: the GRU (framework RMSProp: sums and
   * optimizer edges) and the encoder (framework Adam), run unbudgeted in this JVM.
   */
  @Test
  void rewritesBeforePlanningKeepLossesBitIdentical() {
    // budgets below each graph's peak (gru 5.4 MiB simulated, encoder 14.7), so the rewrites run
    for (Corpus.Family f : List.of(Corpus.Family.GRU, Corpus.Family.ENCODER)) {
      TrainingGraph tg = f.build(Corpus.Size.TEST, 7);
      long budget = (f == Corpus.Family.GRU ? 4 : 13) * MIB;
      LmsResult lr = Lms.builder().budget(budget).mode(LmsMode.TFLMS).build().rewrite(tg);
      assertThat(lr.preRewrites().gradientSums()).as(f.label()).isPositive();
      assertThat(lr.preRewrites().optimizerEdgesRemoved()).as(f.label()).isPositive();
      TrainingGraph pre = new TrainingGraph(lr.graphDef(), tg.manifest());
      assertThat(BudgetedRuns.referenceLosses(pre, STEPS)).as(f.label())
          .containsExactly(BudgetedRuns.referenceLosses(tg, STEPS));
    }
  }

  /**
   * The click model whose table ([200000, 64] float, 48.8 MiB) takes plain gradient descent by
   * TF Java's dense gradient of the gather: a step holds the table and a table-sized gradient
   * (99.7 MiB live; TensorFlow's own minimum was 118 MiB). Its benchmark size is used: the
   * table must dominate the allocator's first regions. At 96 MiB the unmodified graph cannot
   * train; every mode first makes the update sparse (the rows looked up only) and then needs no
   * plan beyond it (about 70 MiB of TensorFlow's allocator), with the same losses bit for bit.
   * Without that rewrite every mode refuses.
   */
  @Test
  void aDenseTableUpdateBecomesSparseAndTrainsWhereNoLmsRunsOutOfMemory() throws Exception {
    TrainingGraph tg = Corpus.Family.EMBEDDING_DENSE.build(Corpus.Size.BENCH, 42);
    long budget = 96 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertOom(tg, budget);
    for (LmsMode mode : List.of(LmsMode.AUTO, LmsMode.REMAT)) {
      LmsResult lr = Lms.builder().budget(budget).mode(mode).build().rewrite(tg);
      assertThat(lr.preRewrites().sparseUpdates()).as(mode.cliName()).isEqualTo(1);
      assertThat(lr.preRewrites().sparseUpdateBytes()).isEqualTo(200_000L * 64 * 4);
      assertThat(lr.predictedPeakAfter()).as(mode.cliName()).isLessThan(60 * MIB);
      BudgetedRuns.assertTrainsLikeTheReference(mode.cliName(), lr, tg, budget, reference);
    }
    assertThatThrownBy(() -> Lms.builder().budget(budget).mode(LmsMode.AUTO)
        .sparseUpdates(false).slotOffload(false).build().rewrite(tg))
        .isInstanceOf(PlanningException.class);
  }

  /**
   * The CNN on resource variables of issue 14 (momentum, batch norms; the benchmark's size, a
   * step of about a second) where TensorFlow runs oneDNN's convolutions: TensorFlow needs about
   * 59 MiB, and at 30 MiB (0.51 of it) the unmodified graph runs out of memory while auto, swap
   * and tflms train three steps with the same losses bit for bit; recomputation alone cannot fit
   * and says so. The third loss is the one that moved before the swap-in triggers left the
   * gradients' {@code Identity} ops alone ({@link dev.lms4j.tf.ControlSources}): a control edge
   * out of one kept oneDNN from merging a filter gradient with its bias gradient. Where
   * TensorFlow's own kernels run, a filter gradient takes a col buffer of up to 31 MiB, more
   * than this budget: skipped there ({@code .ci/allowed-skips}).
   */
  @Test
  void aResourceVariableCnnTrainsAtHalfTensorFlowsNeedWithTheSameLosses() throws Exception {
    assumeOneDnn();
    TrainingGraph tg = Corpus.Family.RESNET_RESOURCE.build(Corpus.Size.BENCH, 42);
    long budget = 30 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertOom(tg, budget);
    eachPlansAndTrains(tg, budget, reference, LmsMode.AUTO, LmsMode.SWAP, LmsMode.TFLMS);
    assertThatThrownBy(() -> Lms.builder().budget(budget).mode(LmsMode.REMAT)
        .slotOffload(false).build()
        .rewrite(tg)).isInstanceOf(PlanningException.class)
        .hasMessageContaining("smallest budget");
  }

  /**
   * The embedding families at the benchmark's size (a [200000, 64] table, 48.8 MiB, updated
   * sparsely; on ref and on resource variables): TensorFlow needs about 71 and 75 MiB though a
   * step's live bytes peak near 53, because init creates the table first and the BFC allocator
   * grows a 64 MiB region for it and hands it all of it. At 60 and 66 MiB the unmodified graphs
   * run out of memory when init runs in the graph's order (chained by
   * {@link dev.lms4j.tf.SerialOrder}, so the run is deterministic: TensorFlow's own order varies
   * between processes, and the sparse graph as given trained at 60 MiB in 1 run of 5, where the
   * table happened to be created late); auto finds no plan needed but has init create the table
   * last ({@link dev.lms4j.tf.InitOrder}), where its region is cut to what is left, and trains
   * with the same losses bit for bit.
   */
  @Test
  void embeddingTablesCreatedLastTrainWhereNoLmsRunsOutOfMemory() throws Exception {
    for (Corpus.Family f : List.of(Corpus.Family.EMBEDDING_SPARSE,
        Corpus.Family.EMBEDDING_RESOURCE)) {
      TrainingGraph tg = f.build(Corpus.Size.BENCH, 42);
      long budget = (f == Corpus.Family.EMBEDDING_SPARSE ? 60 : 66) * MIB;
      double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
      assertOom(new TrainingGraph(dev.lms4j.tf.SerialOrder.enforce(tg.graphDef(),
          tg.manifest()).graphDef(), tg.manifest()), budget);
      LmsResult lr = Lms.builder().budget(budget).mode(LmsMode.AUTO).build().rewrite(tg);
      assertThat(lr.memoryPlan().needed()).as(f.label()).isFalse();
      assertThat(lr.initLayout()).as(f.label()).isNotNull();
      assertThat(lr.initLayout().last()).containsExactly("table");
      assertThat(lr.initLayout().needAfter()).isLessThan(lr.initLayout().needBefore())
          .isLessThanOrEqualTo(budget);
      assertThat(lr.rewritten()).isTrue();
      BudgetedRuns.assertTrainsLikeTheReference(f.label(), lr, tg, budget, reference);
    }
  }

  /**
   * The MLP with dropout and global-norm clipping at the benchmark's size (batch 2048, six
   * hidden layers of 512, framework Adam): TensorFlow needs about 111 MiB. Each dropout mask is a
   * {@code RandomUniform} of a constant shape, so the levelled order used to make all six at the
   * top of the step and hold them through the forward pass; the hybrid planner then stopped at a
   * simulated 84 MiB and only tflms planned (82 MiB). With each mask made right before its reader
   * ({@link dev.lms4j.core.graph.Levels}) auto and swap plan at 64 MiB (0.58 of TensorFlow's
   * need), where the unmodified graph runs out of memory, and train with the same losses bit
   * for bit: no random op is recomputed (the masks are swapped).
   */
  @Test
  void anMlpWithDropoutTrainsAtLittleMoreThanHalfTensorFlowsNeedWithTheSameMasks()
      throws Exception {
    TrainingGraph tg = Corpus.Family.MLP_DROPOUT.build(Corpus.Size.BENCH, 42);
    long budget = 64 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertOom(tg, budget);
    for (LmsMode mode : List.of(LmsMode.AUTO, LmsMode.SWAP)) {
      LmsResult lr = Lms.builder().budget(budget).mode(mode).build().rewrite(tg);
      assertThat(lr.memoryPlan().needed()).as(mode.cliName()).isTrue();
      assertThat(lr.recompute().groups()).as(mode.cliName())
          .allSatisfy(gr -> assertThat(gr.ops()).noneMatch(o -> o.contains("RandomUniform")));
      assertThat(lr.graphDef().getNodeList()).as(mode.cliName())
          .filteredOn(n -> n.getOp().equals("RandomUniform")
              && !n.getName().equals(dev.lms4j.tf.InitOrder.PRIMER)).hasSize(6);
      BudgetedRuns.assertTrainsLikeTheReference(mode.cliName(), lr, tg, budget, reference);
    }
  }

  /**
   * The mixed-precision MLP at the benchmark's size: TensorFlow needs 181-183 MiB for it, its
   * float16 products asking for float32 copies of their inputs and result beside the step's
   * tensors (142 MiB traced). At 140 MiB the unmodified graph runs out of memory, and auto and
   * swap train with the same losses bit for bit. Before the model knew those copies, every plan
   * under TensorFlow's minimum ran out of memory in one of them
   * ({@code docs/bench/corpus-mixed-before.md}: every static mode 1.00).
   */
  @Test
  void aMixedPrecisionMlpTrainsBelowTensorFlowsNeedWithTheSameLosses() throws Exception {
    // measured 2026-12-05 on an Intel Xeon with AVX-512 FP16: one unbudgeted step of this graph
    // did not finish in 3 minutes (each float16 MatMul and BiasAdd alone took under 0.2 s;
    // grappler fuses them into oneDNN's _MklNativeFusedMatMul there), where the whole test took
    // about a minute on an AMD EPYC; with TF_ENABLE_ONEDNN_OPTS=0 the graph steps in 1.5 s there
    // (2026-12-06): TensorFlow's oneDNN float16 path. Skipped on such CPUs, as its measurement
    // cannot end in CI
    Assumptions.assumeFalse(dev.lms4j.core.graph.ScratchEstimates.Host.cpuFlags()
        .contains("avx512_fp16"), "CPU with avx512_fp16: this graph's float16 steps take "
        + "minutes here in TensorFlow's oneDNN kernels");
    TrainingGraph tg = Corpus.Family.MLP_MIXED.build(Corpus.Size.BENCH, 42);
    long budget = 140 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertOom(tg, budget);
    eachPlansAndTrains(tg, budget, reference, LmsMode.AUTO, LmsMode.SWAP);
  }

  /**
   * The MobileNetV2-style CNN (inverted residual blocks of 1x1 expansions, 3x3 depthwise
   * convolutions and linear 1x1 projections; batch norms, {@code Relu6}, the framework's
   * RMSProp) at the benchmark's size: TensorFlow needs about 115 MiB where oneDNN runs. At
   * 60 MiB (0.52 of it) the unmodified graph runs out of memory, and auto and swap train three
   * steps with the same losses bit for bit, with oneDNN on (AVX-512 VNNI/BF16) and off
   * ({@code TF_ENABLE_ONEDNN_OPTS=0}, TensorFlow's own kernels; both run here on 2026-12-02).
   * tflms goes through the probe, as {@code run} and {@code train} use it: with oneDNN on, its
   * plan at the default ratio 0.8 is predicted by the allocator model at 57 MiB but needs 62 and
   * runs out of memory at 60 without the probe, which tries the plan at 0.95 first (traced 49.4
   * MiB) and trains. Recomputation alone plans where oneDNN runs (the benchmark's smallest remat
   * budget is 53 MiB) and trains; with TensorFlow's own kernels it cannot fit (about 73 MiB) and
   * says so.
   */
  @Test
  void aMobileNetTrainsAtHalfTensorFlowsNeedWithTheSameLosses() throws Exception {
    TrainingGraph tg = Corpus.Family.MOBILENET.build(Corpus.Size.BENCH, 42);
    long budget = 60 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertOom(tg, budget);
    eachPlansAndTrains(tg, budget, reference, LmsMode.AUTO, LmsMode.SWAP);
    Probe.Outcome o = probedTrainsLikeTheReference("tflms",
        Lms.builder().budget(budget).mode(LmsMode.TFLMS).build(), tg, budget, reference);
    assertThat(o.result().planner()).as(o.message()).isEqualTo("tflms-swap");
    if (dev.lms4j.core.graph.ScratchEstimates.host().oneDnn()) {
      LmsResult remat = Lms.builder().budget(budget).mode(LmsMode.REMAT).build().rewrite(tg);
      assertThat(remat.recompute().groups()).isNotEmpty();
      BudgetedRuns.assertTrainsLikeTheReference("remat", remat, tg, budget, reference);
    } else {
      assertThatThrownBy(() -> Lms.builder().budget(budget).mode(LmsMode.REMAT)
          .slotOffload(false).build()
          .rewrite(tg)).isInstanceOf(PlanningException.class)
          .hasMessageContaining("smallest budget");
    }
  }

  /**
   * The init-heavy family at the benchmark's size: a 97.7 MiB table whose initializer holds two
   * table-sized temporaries at once, so init, not a step, sets what TensorFlow needs (232 to 275
   * MiB from run to run in the corpus benchmarks). At 200 MiB the graph as given runs out of
   * memory in init, and one allocator region alone does too (measured 2026-12-06: the other
   * variables' initializers ran while two 97.7 MiB tensors held all of it). auto with the probe,
   * as {@code run} and {@code train} use it, finds the failed allocation in the table's
   * initializer and probes init with one region and the table created last: it trains with the
   * unbudgeted losses. Below what init needs, the budget the refusal names is measured with that
   * layout too.
   */
  @Test
  void whereInitRunsOutOfMemoryTheProbeCreatesThatVariableLastInOneRegionAndTrains()
      throws Exception {
    TrainingGraph tg = Corpus.Family.INIT_HEAVY.build(Corpus.Size.BENCH, 42);
    long budget = 200 * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertOom(tg, budget);
    Probe.Outcome o = probedTrainsLikeTheReference("auto",
        Lms.builder().budget(budget).mode(LmsMode.AUTO).build(), tg, budget, reference);
    assertThat(o.message()).contains("one allocator region").contains("table created last");
    // below what init needs (two 97.7 MiB tables at once) the budget is refused, and the budget
    // named is measured with the same init layout: 203 MiB measured (198 bisected, 196 out of
    // memory), where without it the graph as given was bisected to 232
    long below = 194 * MIB;
    Lms tight = Lms.builder().budget(below).mode(LmsMode.AUTO).build();
    Probe.Outcome refused = Probe.closeLoop(tg, tight, Probe.Options.of(below,
        tight.budget().memRatio()));
    assertThat(refused.verdict()).as(refused.message()).isEqualTo(Probe.Verdict.REFUSED);
    assertThat(refused.message()).contains("table created last");
    assertThat(refused.smallestBudgetBytes()).as(refused.message())
        .isBetween(196 * MIB, 215 * MIB);
  }

  /**
   * {@code lms}'s plan probed under {@code budget} as {@code run} and {@code train} probe it: the
   * probe passes a graph, and that graph, run again under the budget, trains with the reference
   * losses.
   */
  private static Probe.Outcome probedTrainsLikeTheReference(String what, Lms lms,
      TrainingGraph tg, long budget, double[] reference) throws Exception {
    Probe.Outcome o = Probe.closeLoop(tg, lms, Probe.Options.of(budget,
        lms.budget().memRatio()));
    assertThat(o.trains()).as(o.message()).isTrue();
    RunResult on = BudgetedRunner.run(new TrainingGraph(o.graphDef(), tg.manifest()),
        BudgetedRunner.Options.of(budget, STEPS));
    assertThat(on.fits()).as(on.toString()).isTrue();
    assertThat(on.losses()).as(what).containsExactly(reference);
    return o;
  }

  /** Each mode plans for {@code budget} (a plan is needed) and trains with the reference losses. */
  private static void eachPlansAndTrains(TrainingGraph tg, long budget, double[] reference,
      LmsMode... modes) throws Exception {
    for (LmsMode mode : modes) {
      LmsResult lr = Lms.builder().budget(budget).mode(mode).build().rewrite(tg);
      assertThat(lr.memoryPlan().needed()).as(mode.cliName()).isTrue();
      BudgetedRuns.assertTrainsLikeTheReference(mode.cliName(), lr, tg, budget, reference);
    }
  }

  private static void assertOom(TrainingGraph tg, long budget) throws Exception {
    RunResult off = BudgetedRunner.run(tg, BudgetedRunner.Options.of(budget, STEPS));
    assertThat(off.fits()).as(off.toString()).isFalse();
    assertThat(off.oom()).as(off.toString()).isTrue();
  }

  /**
   * The budgeted convolutional cases were set where TensorFlow runs oneDNN's convolutions. Where
   * its own kernels run, a filter gradient takes a col buffer that leaves no plan there (an AMD
   * EPYC with AVX2 only, 2026-12-07: the DenseNet's resident tensors and largest op need 40 MiB,
   * and 27 and 28 MiB were refused; the resnet's col buffers reach 31 MiB); named in
   * .ci/allowed-skips.
   */
  private static void assumeOneDnn() {
    Assumptions.assumeTrue(dev.lms4j.core.graph.ScratchEstimates.host().oneDnn(),
        "TensorFlow's own convolution kernels: their col buffers exceed this budget");
  }
}
