package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.Probe;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.corpus.ProbeGraphs;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.models.ModelZoo;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The probe closes the loop between a plan and TensorFlow's real allocator (each probe is init
 * plus one traced step in a worker JVM under the BFC limit): a plan predicted too low is
 * re-planned with what the probe measured and then trains; where the planner refuses a budget at
 * which the unmodified graph trains, the unmodified graph trains; a budget nothing fits is
 * refused with a smallest budget taken from a measurement; and the probe leaves the training's
 * losses as they are.
 */
class ProbeTest {
  private static final long MIB = 1 << 20;
  private static final int STEPS = 2;

  /**
   * LeNet (batch 100, width 32, dense 1024) at 88 MiB, issue 15's case: the model predicts 72.6
   * MiB without LMS, TensorFlow needs ~92 MiB. The first "plan" is the unmodified graph (as
   * {@code auto} once accepted it: "LMS not necessary"), so its prediction is too low by
   * construction, whatever the simulator learns later; the probe runs out of memory (measured:
   * 12.3 MiB for gradients/MatMul_3), the limit drops by that size, {@code auto} plans at it, and
   * that plan trains at 88 MiB with the unbudgeted run's losses.
   */
  @Test
  void aPlanPredictedTooLowIsReplannedAndTrains() throws Exception {
    TrainingGraph tg = ModelZoo.getOrThrow("lenet").build(100, Map.of());
    long budget = 88 * MIB;
    Lms off = Lms.builder().budget(budget).mode(LmsMode.OFF).build();
    Lms auto = Lms.builder().budget(budget).mode(LmsMode.AUTO).build();
    double first = auto.budget().memRatio();
    List<Double> ratios = new ArrayList<>();
    Probe.Outcome o = Probe.closeLoop(tg, b -> {
      ratios.add(b.memRatio());
      return ratios.size() == 1 ? off.rewrite(tg) : auto.withBudget(b).rewrite(tg);
    }, Probe.Options.of(budget, first));

    assertThat(o.verdict()).as(o.message()).isEqualTo(Probe.Verdict.REPLANNED);
    assertThat(o.replans()).isPositive();
    Probe.Attempt try1 = o.attempts().get(0);
    assertThat(try1.graph()).isEqualTo("plan");
    assertThat(try1.oom()).isTrue();
    assertThat(try1.failedAllocationBytes()).isPositive();
    // the re-plan's limit is the first prediction less at least the failed allocation
    assertThat(ratios.get(1) * budget)
        .isLessThanOrEqualTo(try1.predictedPeakBytes() - try1.failedAllocationBytes() + 1.0);
    Probe.Attempt last = o.attempts().get(o.attempts().size() - 1);
    assertThat(last.fits()).isTrue();
    assertThat(last.measuredPeakBytes()).isPositive().isLessThanOrEqualTo(budget);
    assertThat(last.predictedPeakBytes()).isEqualTo(o.result().predictedPeakAfter());
    assertThat(o.result().rewritten()).isTrue();

    RunResult on = BudgetedRunner.run(new TrainingGraph(o.graphDef(), tg.manifest()),
        BudgetedRunner.Options.of(budget, STEPS));
    assertThat(on.fits()).as(on.toString()).isTrue();
    assertThat(on.losses()).containsExactly(BudgetedRuns.referenceLosses(tg, STEPS));
  }

  /**
   * A 16 MiB embedding table updated sparsely: TensorFlow trains it at 34 MiB (measured: 33
   * runs out of memory, traced peak 32.1 MiB), 35 leaves 1 MiB for the BFC limit's flips. At
   * memory ratio 0.45 the planner's limit (15.75 MiB) is below its floor (the table alone is 16
   * MiB), so it refuses; the probe finds that the unmodified graph trains and it trains.
   */
  @Test
  void whereThePlannerRefusesButTensorFlowTrainsTheUnmodifiedGraphTrains() throws Exception {
    TrainingGraph tg = ProbeGraphs.sparseTable();
    long budget = 35 * MIB;
    Lms auto = Lms.builder().budget(budget).memRatio(0.45).mode(LmsMode.AUTO).build();
    assertThatThrownBy(() -> auto.rewrite(tg)).isInstanceOf(PlanningException.class);

    Probe.Outcome o = Probe.closeLoop(tg, b -> auto.withBudget(b).rewrite(tg),
        Probe.Options.of(budget, 0.45));
    assertThat(o.verdict()).as(o.message()).isEqualTo(Probe.Verdict.UNMODIFIED);
    assertThat(o.attempts()).singleElement().satisfies(a -> {
      assertThat(a.graph()).isEqualTo("unmodified");
      assertThat(a.fits()).isTrue();
      assertThat(a.measuredPeakBytes()).isPositive().isLessThanOrEqualTo(budget);
    });
    assertThat(o.graphDef()).isEqualTo(tg.graphDef());
    assertThat(o.result().rewritten()).isFalse();
    assertThat(o.message()).contains("LMS is not necessary");

    RunResult on = BudgetedRunner.run(tg, BudgetedRunner.Options.of(budget, STEPS));
    assertThat(on.fits()).as(on.toString()).isTrue();
    assertThat(on.losses()).containsExactly(BudgetedRuns.referenceLosses(tg, STEPS));
  }

  /**
   * One 2048 x 2048 layer (weight and gradient 16 MiB each; traced peak without a limit ~49 MiB,
   * TensorFlow needs 50 MiB) at 20 MiB: the planner refuses, the unmodified graph runs out of
   * memory, so the budget is refused with a smallest budget that a last probe confirms: the
   * planner's estimate (42 MiB) when a plan for it trains, else a traced run without a limit
   * plus the allocation that failed (about 49 + 16 MiB).
   */
  @Test
  void aBudgetNothingFitsIsRefusedWithAMeasuredSmallestBudget() {
    TrainingGraph tg = ProbeGraphs.wideDense();
    long budget = 20 * MIB;
    Lms auto = Lms.builder().budget(budget).build();
    Probe.Outcome o = Probe.closeLoop(tg, b -> auto.withBudget(b).rewrite(tg),
        Probe.Options.of(budget, auto.budget().memRatio()));
    assertThat(o.verdict()).as(o.message()).isEqualTo(Probe.Verdict.REFUSED);
    assertThat(o.trains()).isFalse();
    assertThat(o.attempts()).singleElement().satisfies(a -> {
      assertThat(a.graph()).isEqualTo("unmodified");
      assertThat(a.oom()).isTrue();
    });
    assertThat(o.smallestBudgetBytes()).isGreaterThan(32 * MIB);
    assertThat(o.message()).startsWith("A budget of 20 MiB cannot work")
        .contains("smallest budget that could work is about").contains("measured")
        .contains("checked: ").doesNotContain("\n");
    System.out.println("refusal: " + o.message());
  }

  /**
   * The trainer with {@link LmsCallback} at a budget where {@code auto} rewrites the mlp (batch
   * 2048, width 256, 33 MiB; ZooUnderBudgetTest): the same epoch losses with the probe (which
   * ran, in its own worker) as without it.
   */
  @Test
  void theProbeLeavesTheTrainingLossesBitIdentical() throws Exception {
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(2048, Map.of("width", "256"));
    long budget = 33 * MIB;
    List<Double> with = new ArrayList<>();
    List<Double> without = new ArrayList<>();
    LmsCallback probing = LmsCallback.of(budget);
    LmsCallback trusting = LmsCallback.of(budget).withProbe(false);
    for (LmsCallback cb : List.of(probing, trusting)) {
      try (Trainer t = new Trainer(tg)) {
        var data = SyntheticDataset.forManifest(tg.manifest(), 2 * 2048, 7);
        for (Logs l : t.fit(data, 2, cb)) {
          (cb == probing ? with : without).add(l.loss());
        }
      }
    }
    assertThat(probing.probe()).hasValueSatisfying(o -> {
      assertThat(o.trains()).as(o.message()).isTrue();
      assertThat(o.attempts()).isNotEmpty();
    });
    assertThat(trusting.probe()).isEmpty();
    assertThat(probing.resultOrThrow().rewritten()).isTrue();
    assertThat(with).hasSize(2).containsExactlyElementsOf(without);
  }
}
