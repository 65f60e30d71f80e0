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
 * A scheduling step ({@code --scheduler}) combined with recomputation keeps the math. Measured
 * 2026-12-02 on the corpus U-Net (bench size, oneDNN on): with the list scheduler's order (kept:
 * it lowers the unplanned simulated peak from 27.9 to 27.1 MiB), remat's plan at 28 MiB
 * recomputed the head's input activation for its filter gradient, and the clone's trigger stood
 * in (a {@code Conv2DBackpropInput}) for the gradient Identity; the schedule had that input
 * gradient wait on the head's bias update, whose bias gradient oneDNN merged into the filter
 * gradient reading the clone. TensorFlow ran the step without the cycle (no error; no update
 * after it ran), and the second loss was 2.2975 instead of 1.4608. {@code ControlSources} now
 * counts a merged bias gradient as running with its filter gradient, and {@code Lms} checks the
 * graph it writes for such a cycle ({@code ScheduleRewriter.cycle}; with a schedule it plans
 * again without it, so without the first fix this test sees no schedule).
 */
class ScheduleWithRecomputeTest {
  private static final int STEPS = 2;

  @Test
  void aRecomputingPlanUnderTheListScheduleKeepsItAndTheLosses() {
    TrainingGraph tg = Corpus.Family.UNET.build(Corpus.Size.BENCH, 42);
    double[] reference = BudgetedRuns.referenceLosses(tg, STEPS);
    // planned with no kernel scratch, as where oneDNN runs the convolutions (there the case was
    // found): the same plans on every CPU; the runs have no budget
    java.util.Map<String, Long> noScratch = BudgetedRuns.noScratch(tg);
    LmsResult r = Lms.builder().budget(28L << 20).mode(LmsMode.REMAT).scratch(noScratch)
        .scheduler(Scheduling.Scheduler.LIST).build().rewrite(tg);
    assertThat(r.recompute().clonedOps()).as("the case needs a recomputing plan").isPositive();
    assertThat(r.scheduling()).as("the schedule is kept").isNotNull();
    assertThat(BudgetedRuns.referenceLosses(new TrainingGraph(r.graphDef(), tg.manifest()),
        STEPS)).containsExactly(reference);
    // auto's plan, which swaps and recomputes, under the same order
    LmsResult auto = Lms.builder().budget(20L << 20).mode(LmsMode.AUTO).scratch(noScratch)
        .scheduler(Scheduling.Scheduler.LIST).build().rewrite(tg);
    assertThat(auto.scheduling()).isNotNull();
    assertThat(auto.recompute().clonedOps()).isPositive();
    assertThat(BudgetedRuns.referenceLosses(new TrainingGraph(auto.graphDef(), tg.manifest()),
        STEPS)).containsExactly(reference);
  }
}
