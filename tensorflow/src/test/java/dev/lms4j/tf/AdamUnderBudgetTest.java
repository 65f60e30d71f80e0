package dev.lms4j.tf;

import dev.lms4j.core.plan.LmsMode;
import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import org.junit.jupiter.api.Test;

/**
 * Graphs built with TF Java's framework Adam ({@code org.tensorflow.framework.optimizers.Adam},
 * {@link AdamNet}) under real budgets: each run is a worker JVM whose BFC allocator is limited.
 */
class AdamUnderBudgetTest {
  private static final long MIB = 1 << 20;

  /**
   * LMS trains an MLP built with the framework's Adam (8 layers of 512 units, batch 2048) where
   * the unmodified graph runs out of memory, with the unbudgeted run's losses bit for bit.
   * Measured here: 106.1 MiB without LMS (16 activations of 4 MiB, 9 MiB of weights with two
   * Adam slots each, the gradients). With LMS ({@code auto}) at 74 MiB the planner predicted
   * 57 MiB and the run measured 67.0 MiB (in-place forwarding and kernel memory are not
   * modelled); at 80 MiB it may use 64 MiB, which leaves that margin (measured here: 61.1 MiB
   * predicted, 68.1 MiB measured, 11% above the prediction, within the README's ~15%).
   *
   * <p>A CNN (AdamNet.build(64, 32, 32, 256)) was tried first: it measured 128.5 MiB unbudgeted
   * (the simulator predicts 111), yet it ran out of memory at 144 MiB with and without LMS, in a
   * {@code Conv2DBackpropInput} asking for 20.5 MiB of oneDNN scratch that the traced peak,
   * sampled between ops, does not see.
   */
  @Test
  void lmsTrainsTheFrameworkAdamGraphWhereNoLmsRunsOutOfMemory() throws Exception {
    TrainingGraph tg = AdamNet.mlp(2048, 512, 8);
    long budget = 80 * MIB;

    RunResult free = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, 3));
    assertThat(free.fits()).as(free.toString()).isTrue();
    assertThat(free.peakBytes()).isGreaterThan(budget);

    RunResult off = BudgetedRunner.run(tg, BudgetedRunner.Options.of(budget, 3));
    assertThat(off.oom()).as(off.toString()).isTrue();

    LmsResult lr = Lms.builder().budget(budget).mode(LmsMode.AUTO).build().rewrite(tg);
    assertThat(lr.rewritten()).isTrue();
    RunResult on = BudgetedRunner.run(new TrainingGraph(lr.graphDef(), tg.manifest()),
        BudgetedRunner.Options.of(budget, 3));
    assertThat(on.fits()).as(on.toString()).isTrue();
    assertThat(on.losses()).containsExactly(free.losses());
    // the measured peak against the prediction (not against the budget the run just fit
    // under, which cannot fail): within the README's ~15% above it
    assertThat(on.peakBytes()).as("measured vs predicted %d", lr.predictedPeakAfter())
        .isLessThanOrEqualTo((long) (lr.predictedPeakAfter() * 1.15));
  }

  /**
   * What relaxing the framework's control edges saves: on an MLP of 8 layers of 1024 units
   * (batch 64) the unmodified graph keeps all nine weight gradients (4 MiB each) alive until the
   * last one is computed. Measured here: peak 160.5 MiB unmodified, 136.3 MiB relaxed. At 150 MiB
   * the unmodified graph runs out of memory and the relaxed one trains, with the unmodified
   * graph's unbudgeted losses bit for bit.
   */
  @Test
  void relaxedEdgesLowerThePeakUnderARealBudget() throws Exception {
    TrainingGraph tg = AdamNet.mlp(64, 1024, 8);
    OptimizerEdges.Result r = OptimizerEdges.relax(tg);
    assertThat(r.changed()).isTrue();
    TrainingGraph relaxed = new TrainingGraph(r.graphDef(), tg.manifest());
    long budget = 150 * MIB;

    RunResult free = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, 3));
    assertThat(free.fits()).as(free.toString()).isTrue();
    assertThat(free.peakBytes()).isGreaterThan(budget);

    RunResult off = BudgetedRunner.run(tg, BudgetedRunner.Options.of(budget, 3));
    assertThat(off.oom()).as(off.toString()).isTrue();

    RunResult on = BudgetedRunner.run(relaxed, BudgetedRunner.Options.of(budget, 3));
    assertThat(on.fits()).as(on.toString()).isTrue();
    assertThat(on.losses()).containsExactly(free.losses());
    assertThat(on.peakBytes()).isLessThan(free.peakBytes() - 16 * MIB);
  }
}
