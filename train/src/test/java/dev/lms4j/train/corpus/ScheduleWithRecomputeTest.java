package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.schedule.Scheduling;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.BudgetedRuns;
import org.junit.jupiter.api.Test;

/**
 * A scheduling step ({@code --scheduler}) is not combined with recomputation. Measured
 * 2026-12-02 on the corpus U-Net (bench size): with the list scheduler's order (kept: it lowers
 * the unplanned simulated peak from 27.9 to 27.1 MiB) remat's plan at 28 MiB recomputed 16 ops
 * and the step's math changed (second loss 2.2975 instead of 1.4608); the same order with no
 * plan, or with swaps alone (tflms and swap at 16 and 20 MiB), kept the losses. The cause is not
 * found; until it is, {@code Lms} plans such a graph again without the schedule.
 */
class ScheduleWithRecomputeTest {
  private static final int STEPS = 2;

  @Test
  void aRecomputingPlanIsMadeWithoutTheScheduleAndKeepsTheLosses() {
    TrainingGraph tg = Corpus.Family.UNET.build(Corpus.Size.BENCH, 42);
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    LmsResult r = Lms.builder().budget(28L << 20).mode(LmsMode.REMAT)
        .scheduler(Scheduling.Scheduler.LIST).build().rewrite(tg);
    assertThat(r.recompute().clonedOps()).as("the case needs a recomputing plan").isPositive();
    assertThat(BudgetedRuns.referenceLosses(new TrainingGraph(r.graphDef(), tg.manifest()),
        STEPS)).containsExactly(reference);
    assertThat(r.scheduling()).isNull();
    // the list order alone is kept (a swap plan under it keeps the losses)
    LmsResult swap = Lms.builder().budget(20L << 20).mode(LmsMode.TFLMS)
        .scheduler(Scheduling.Scheduler.LIST).build().rewrite(tg);
    assertThat(swap.scheduling()).isNotNull();
    assertThat(swap.recompute().isEmpty()).isTrue();
    assertThat(BudgetedRuns.referenceLosses(new TrainingGraph(swap.graphDef(), tg.manifest()),
        STEPS)).containsExactly(reference);
  }
}
