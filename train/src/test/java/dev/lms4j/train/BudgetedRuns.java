package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.tf.run.StepLoop;
import java.util.ArrayList;
import java.util.List;
import org.assertj.core.data.Percentage;

/** What the budgeted training tests share: reference losses and runs of a plan under a budget. */
public final class BudgetedRuns {
  private BudgetedRuns() {}

  /**
   * No kernel scratch for any op of {@code tg} ({@code LmsBuilder.scratch}): plans made with it
   * are the same on every CPU (as where oneDNN runs the convolutions, whose gradients take
   * none), for checks of the math that run without a budget.
   */
  public static java.util.Map<String, Long> noScratch(TrainingGraph tg) {
    java.util.Map<String, Long> out = new java.util.HashMap<>();
    tg.graphDef().getNodeList().forEach(n -> out.put(n.getName(), 0L));
    return out;
  }

  /**
   * The unbudgeted losses of {@code steps} steps: the budgeted worker's step loop, session config
   * and seed ({@link BudgetedRunner.Options#of}), run in this JVM.
   */
  public static double[] referenceLosses(TrainingGraph tg, int steps) {
    BudgetedRunner.Options o = BudgetedRunner.Options.of(0, steps);
    List<Double> losses = new ArrayList<>();
    StepLoop.run(tg.graphDef(), tg.manifest(),
        SessionConfigs.build(o.deterministic(), true, o.memOpt()), steps, o.seed(),
        rec -> losses.add(rec.loss()));
    return losses.stream().mapToDouble(Double::doubleValue).toArray();
  }

  /**
   * Runs {@code lr}'s graph for {@code reference.length} steps in a worker under {@code budget}
   * and checks that it fits, reaches the reference losses bit for bit and peaks within the
   * budget.
   */
  public static void assertTrainsLikeTheReference(String what, LmsResult lr, TrainingGraph tg,
      long budget, double[] reference) throws Exception {
    RunResult on = run(lr, tg, budget, reference.length);
    assertThat(on.fits()).as(what + ": " + on).isTrue();
    assertThat(on.losses()).as(what).containsExactly(reference);
    assertThat(on.peakBytes()).as(what).isLessThanOrEqualTo(budget);
  }

  /** As {@link #assertTrainsLikeTheReference}, each loss within {@code relative} of its own. */
  public static void assertTrainsCloseToTheReference(String what, LmsResult lr,
      TrainingGraph tg, long budget, double[] reference, double relative) throws Exception {
    RunResult on = run(lr, tg, budget, reference.length);
    assertThat(on.fits()).as(what + ": " + on).isTrue();
    assertThat(on.losses()).hasSameSizeAs(reference);
    for (int i = 0; i < reference.length; i++) {
      assertThat(on.losses()[i]).as("%s loss %d", what, i + 1)
          .isCloseTo(reference[i], Percentage.withPercentage(relative * 100));
    }
  }

  private static RunResult run(LmsResult lr, TrainingGraph tg, long budget, int steps)
      throws Exception {
    return BudgetedRunner.run(new TrainingGraph(lr.graphDef(), tg.manifest()),
        BudgetedRunner.Options.of(budget, steps));
  }
}
