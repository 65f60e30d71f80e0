package dev.lms4j.train;

import dev.lms4j.core.plan.LmsMode;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.models.ModelZoo;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every model of the zoo, at a small configuration, under a budget B below what it needs
 * without LMS: the run without LMS runs out of memory, and the rewritten graphs of
 * {@code remat} (recomputation alone) and {@code auto} (recompute, then swap what still does not
 * fit) each train 3 steps at B with losses bit-identical to the unbudgeted run's; so does
 * XLA-style standard rematerialization (on gpt2 at memory ratio 0.8, where its plan recomputes
 * reads of variables the step updates).
 *
 * <p>Each B was chosen by measuring the unbudgeted peak (the traced step's highest
 * {@code allocator_bytes_in_use}, BFC allocator, one worker per run) and then the smallest
 * budget the recomputation planner accepts. Recomputation plans here use a memory ratio of 0.85
 * (the planner aims at 85% of B; the default 0.8 leaves a margin this small budget does not
 * need: recomputation's measured peaks have been close to its predictions), {@code auto} keeps
 * the default 0.8. (It was 0.9 while the model counted the fed batch, which lives in host
 * memory, as device memory: on mlp that 6 MiB was the margin, and at 0.9 without it the XLA-style
 * plan ran out of memory at 33 MiB, traced 30.1 MiB where 28.6 were predicted.) Where recomputation alone cannot reach any budget below the no-LMS peak, the
 * test asserts that the planner says so (a {@link PlanningException} naming the smallest budget)
 * and that {@code auto} trains there: that is the honest result for that model.
 *
 * <p>The reference losses come from an in-process run of the same step loop with the same
 * session configuration and synthetic feeds as the worker (memory allocation does not change
 * the math).
 */
class ZooUnderBudgetTest {
  private static final long MIB = 1 << 20;
  private static final int STEPS = 3;
  /**
   * Off the OOM edge: each budget is at least this far below the unbudgeted peak measured in
   * the same test (BFC budgets flip by 1-2 MiB between runs), so the run without LMS clearly
   * runs out of memory; the plans keep their memory ratio's room (10-20%) on the other side.
   * It was 0.08 until a CI machine of another CPU (its oneDNN kernels differ) measured unet3d's
   * peak at 25.8 MiB, where this EPYC measures 26.9 in every run: 24 MiB is 7% below it, still
   * 1.8 MiB off the edge, and the run without LMS must still run out of memory (checked).
   */
  private static final double MARGIN = 0.05;
  /** The memory ratio the recomputation plans aim at (see the class comment). */
  private static final double REMAT_RATIO = 0.85;
  private static final java.util.Set<String> CONVOLUTIONAL = java.util.Set.of("resnet", "lenet",
      "resnet18", "resnet50", "resnet101", "vgg16", "unet3d");

  /**
   * True where TensorFlow runs oneDNN's convolution kernels (AVX-512 VNNI/BF16, AVX-VNNI or AMX,
   * unless {@code TF_ENABLE_ONEDNN_OPTS} says otherwise): the kernels the budgets were set on.
   */
  static boolean oneDnn() {
    return dev.lms4j.core.graph.ScratchEstimates.host().oneDnn();
  }

  static Stream<Arguments> cases() {
    return Stream.of(
        // measured peak without LMS ~38.1 MiB; 33 MiB, 0.85 x 33 = 28.1
        Arguments.of("mlp", 2048, Map.of("width", "256"), 33L, true),
        // ~25.0 MiB; the model holds the max-pool gradient's arg-max indices and the
        // initialisers' held constants; 21 MiB: 0.85 x 21 = 17.9
        Arguments.of("resnet", 16, Map.of("width", "16", "image", "64"), 21L, true),
        // lenet is not here: at batch 512 its peak is ~26.9 MiB, but weights, feeds and the
        // largest op (conv1's ReluGrad: 3 x 6.1 MiB) need ~20 MiB, so auto's floor (25 MiB)
        // leaves no budget MARGIN below the peak; LeNet trains under a real budget with LMS in
        // CliTest (trainer, 88 MiB) and ProbeTest
        // ~23.2 MiB; remat's groups reached a simulated 14 MiB ("about 17 MiB") before the
        // model let the only reader of a buffer reuse it and left the fed images out of device
        // memory, and remat refused 16 MiB; now its plan trains there (at 18 MiB remat-xla's
        // plan, accepted at a simulated 16.2, once ran out of memory without the probe: 576 KiB
        // in gradients/Conv2DBackpropFilter)
        Arguments.of("resnet18", 32, Map.of("width", "16", "image", "64"), 16L, true),
        // ~22.6 MiB; 0.85 x 15 = 12.75
        Arguments.of("resnet50", 16, Map.of("width", "4", "image", "96"), 15L, true),
        // ~17.2 MiB; 0.85 x 13 = 11.05
        Arguments.of("resnet101", 8, Map.of("width", "4", "image", "96"), 13L, true),
        // ~18.9 MiB; 0.85 x 14 = 11.9
        Arguments.of("vgg16", 16, Map.of("width", "8", "image", "64", "fc", "32"), 14L, true),
        // width 5: ~26.9 MiB in every one of 12 runs. At width 4 the peak without LMS was
        // 20.5 or 21.4 MiB depending on TensorFlow's order, and the budget there (19 MiB, the
        // smallest at which remat-xla's plan trained in the fixed order) sat on the edge of
        // MARGIN: one CI run in four failed the precondition. At 24 MiB each plan trained in
        // every run (traced 19.7 MiB); at 23 remat's plan (18.7 MiB predicted) ran out of memory
        // in a Conv3DBackpropInput and at 20 remat-xla's in a Slice of the skip's gradient:
        // the simulator misses 3-4 MiB on 3D convolutions' gradients (issue 15)
        Arguments.of("unet3d", 1, Map.of("side", "32", "width", "5", "levels", "3"), 24L, true),
        // ~22.0 MiB; 20 MiB keeps MARGIN below it, where grappler-style groups cannot go
        // (their smallest simulated peak is 18 MiB: "about 21 MiB"), so remat must say so
        // while remat-xla and auto train. Its plans once moved the second
        // loss by one ulp: a swap-in re-pointed into a five-input gradient AddN, whose inputs
        // grappler sorts by name (OpTypes.orderSensitive); the planners leave such readers alone
        Arguments.of("gpt2", 8, Map.of("layers", "2", "width", "128", "seq", "64", "heads", "4"),
            20L, false));
  }

  @ParameterizedTest(name = "{0} batch {1} {2} at {3} MiB")
  @MethodSource("cases")
  void rematAndAutoTrainWhereNoLmsRunsOutOfMemory(String model, int batch,
      Map<String, String> options, long budgetMib, boolean rematFits) throws Exception {
    // The convolutional cases' budgets were measured where oneDNN runs the convolutions, whose
    // gradients take no scratch. Where TensorFlow's own kernels run (an AMD EPYC without
    // AVX-512), a filter gradient asks for a col buffer of ~14-27 MiB whatever the batch
    // (ScratchEstimates models it): at these budgets no plan can hold it, so the planners say so
    // and the cases cannot run there (named in .ci/allowed-skips, so no other skip passes CI).
    Assumptions.assumeTrue(!CONVOLUTIONAL.contains(model) || oneDnn(),
        "needs oneDNN's convolution kernels: TensorFlow's own take a col buffer larger than "
            + "these budgets");
    TrainingGraph tg = ModelZoo.getOrThrow(model).build(batch, options);
    long budget = budgetMib * MIB;
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    assertThat(reference).hasSize(STEPS);
    for (double l : reference) {
      assertThat(l).isFinite();
    }

    RunResult unbudgeted = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, 2));
    assertThat(unbudgeted.fits()).as(unbudgeted.toString()).isTrue();
    assertThat(budget).as("%s: %d MiB against a measured peak of %.1f MiB", model, budgetMib,
        unbudgeted.peakBytes() / (double) MIB)
        .isLessThanOrEqualTo((long) (unbudgeted.peakBytes() * (1 - MARGIN)));
    RunResult off = BudgetedRunner.run(tg, BudgetedRunner.Options.of(budget, STEPS));
    assertThat(off.fits()).as(off.toString()).isFalse();
    assertThat(off.oom()).as(off.toString()).isTrue();

    // recomputation with every weight on the device (with weight offload, remat plans gpt2 at
    // its budget too: checked below)
    Lms remat = Lms.builder().budget(budget).memRatio(REMAT_RATIO).mode(LmsMode.REMAT)
        .weightOffload(false).build();
    // XLA-style remat alone. On gpt2 at the default memory ratio 0.8 its plan recomputes the
    // layer norms' Mul_1 (reads gamma) and Add_1 (reads beta) in the backward pass; those clones
    // once ran after the optimizer had updated gamma and beta and moved the second loss by one
    // ulp. Each such clone now has a control edge to the variable's update (VariableReads); the
    // plan at the higher ratio recomputes no variable read, so gpt2 is checked at 0.8
    double xlaRatio = model.equals("gpt2") ? 0.8 : REMAT_RATIO;
    LmsResult xla = Lms.builder().budget(budget).memRatio(xlaRatio)
        .mode(LmsMode.REMAT).mode(LmsMode.REMAT_XLA).build().rewrite(tg);
    assertThat(xla.rewritten()).isTrue();
    assertThat(xla.predictedPeakAfter()).isLessThanOrEqualTo((long) (budget * xlaRatio));
    assertTrainsLikeTheReference(xla, tg, budget, reference);
    if (rematFits) {
      LmsResult lr = remat.rewrite(tg);
      assertThat(lr.rewritten()).isTrue();
      assertThat(lr.recompute().clonedOps()).isPositive();
      assertThat(lr.plan().swapOuts()).isEmpty();
      assertThat(lr.predictedPeakAfter()).isLessThanOrEqualTo((long) (budget * REMAT_RATIO));
      assertTrainsLikeTheReference(lr, tg, budget, reference);
    } else {
      assertThatThrownBy(() -> remat.rewrite(tg)).isInstanceOf(PlanningException.class)
          .hasMessageContaining("smallest budget");
      // with its weights on the host between their reads, recomputation plans and trains
      LmsResult offloaded = Lms.builder().budget(budget).memRatio(REMAT_RATIO)
          .mode(LmsMode.REMAT).build().rewrite(tg);
      assertThat(offloaded.preRewrites().offloadedWeights()).isPositive();
      assertTrainsLikeTheReference(offloaded, tg, budget, reference);
    }

    LmsResult auto = Lms.builder().budget(budget).mode(LmsMode.AUTO).build().rewrite(tg);
    assertThat(auto.rewritten()).isTrue();
    assertThat(auto.predictedPeakAfter()).isLessThanOrEqualTo((long) (budget * 0.8));
    assertTrainsLikeTheReference(auto, tg, budget, reference);
  }

  private static void assertTrainsLikeTheReference(LmsResult lr, TrainingGraph tg, long budget,
      double[] reference) throws Exception {
    if (lr.preRewrites().gradientSums() > 0) {
      // Named reason (GradientSumsRoundingTest): grappler's arithmetic optimizer rewrites the
      // unmodified graph's AddNs of partial gradients, so the reference does not sum them in
      // input order, while the running accumulations that replace them (tagged so grappler
      // leaves them alone) do; with arithmetic optimization off both agree bit for bit. On
      // gpt2 this moves the second loss by a few ulps (5.5729570388793945, not
      // 5.572957515716553).
      assertTrainsCloseToTheReference(lr, tg, budget, reference, 1e-6);
      return;
    }
    BudgetedRuns.assertTrainsLikeTheReference(lr.planner(), lr, tg, budget, reference);
  }

  private static void assertTrainsCloseToTheReference(LmsResult lr, TrainingGraph tg,
      long budget, double[] reference, double relative) throws Exception {
    BudgetedRuns.assertTrainsCloseToTheReference(lr.planner(), lr, tg, budget, reference,
        relative);
  }
}
