package dev.lms4j.optimal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.PlanningContext;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.TensorPolicy;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The exact reference's decisions applied through lms4j's own appliers and simulated: the plan
 * must fit the budget in the order the reference assumes, and cost what the solver says.
 */
class ExactPlanTest {
  private static final Logger LOG = LoggerFactory.getLogger(ExactPlanTest.class);
  private static final long MB = 1 << 20;

  private static long peak(DataflowGraph g) {
    return MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes();
  }

  private static PlanningContext ctx(DataflowGraph g, long budget) {
    return PlanningContext.of(Budget.of(budget), TensorPolicy.builtin(g));
  }

  /**
   * On chains of 8 and 10 layers at 45-80% of the peak: every solution, applied and
   * simulated in the reference's order, fits the limit, and its predicted step time (the plan's
   * cost under the same cost model) is the solver's objective; proven optima on the 54-op chain.
   */
  @Test
  void appliedDecisionsFitAndCostWhatTheSolverSays() {
    int plans = 0;
    int withRecompute = 0;
    int withSwaps = 0;
    for (int layers : new int[] {8, 10}) {
      DataflowGraph g = SyntheticGraphs.trainingChain(layers, MB, 64 * 1024);
      long before = peak(g);
      for (double f : new double[] {0.8, 0.6, 0.45}) {
        long budget = (long) (before * f / 0.8);
        PlanningContext ctx = ctx(g, budget);
        ExactPlan p = new ExactPlanner(8).solve(g, ctx);
        OptimalPlanner.Result r = p.solution();
        MemoryPlan plan = p.plan();
        LOG.info("{} ops at {}: {}, simulated {} of limit {}, {} swaps, {} clones, {} ms vs {}",
            g.size(), f, r.status(), p.simulatedPeak(), ctx.budget().limit(),
            plan.swaps().swapOuts().size(), plan.recompute().clonedOps(),
            plan.estimate().stepMsAfter(), r.stepMs());
        assertThat(plan.needed()).as("%d layers at %.2f", layers, f).isTrue();
        assertThat(p.faithful()).as("the reference's own order").isTrue();
        assertThat(p.simulatedPeak()).as("%d layers at %.2f", layers, f)
            .isLessThanOrEqualTo(ctx.budget().limit());
        assertThat(plan.estimate().peakAfter()).isEqualTo(p.simulatedPeak());
        // the same graph as the one facade applies
        assertThat(p.applied().size()).isEqualTo(plan.applyTo(g).size());
        assertThat(p.applied().size()).isEqualTo(g.size() + plan.swaps().addedOps()
            + plan.recompute().clonedOps());
        // the solver pays each swap-out, swap-in and recomputation it decides, as the plan does
        assertThat(plan.swaps().swapOuts()).hasSize(r.swapped());
        assertThat(plan.recompute().clonedOps()).isEqualTo(r.recomputed());
        assertThat(plan.estimate().stepMsAfter()).as("%d layers at %.2f", layers, f)
            .isCloseTo(r.stepMs(), within(1e-4)); // coefficients rounded to ns
        if (layers == 10 && f != 0.8) {
          assertThat(r.status()).isEqualTo("OPTIMAL"); // README: proven at 54 ops
        }
        plans++;
        withRecompute += plan.recompute().isEmpty() ? 0 : 1;
        withSwaps += plan.swaps().isEmpty() ? 0 : 1;
      }
    }
    assertThat(plans).isEqualTo(6);
    // both kinds of decisions went through the appliers
    assertThat(withRecompute).isPositive();
    assertThat(withSwaps).isPositive();
  }

  /** The reference is a mode: found through the enum, generous budgets change nothing. */
  @Test
  void theReferenceIsAModeBehindThePlannerInterface() {
    DataflowGraph g = SyntheticGraphs.trainingChain(6, MB, 64 * 1024);
    assertThat(LmsMode.OPTIMAL.planner()).isInstanceOf(ExactPlanner.class);
    assertThat(LmsMode.OPTIMAL.userFacing()).isFalse();
    assertThat(LmsMode.OPTIMAL.plan(g, ctx(g, 1L << 30)).needed()).isFalse();
    long budget = (long) (peak(g) * 0.6 / 0.8);
    MemoryPlan p = LmsMode.OPTIMAL.plan(g, ctx(g, budget));
    assertThat(p.planner()).isEqualTo("optimal");
    assertThat(p.needed()).isTrue();
  }

  /**
   * Below the model's floor the solver has nothing to search: the refusal names the floor, and
   * the same figure for any budget below it; the floor is what every stage must hold.
   */
  @Test
  void aBudgetBelowTheFloorIsRefusedNamingIt() {
    DataflowGraph g = SyntheticGraphs.trainingChain(6, MB, 64 * 1024);
    OptimalPlanner.Problem pr = OptimalPlanner.problem(g, OptimalPlanner.Options.of(MB));
    long floor = Budget.of(MB).smallestBudgetFor(pr.floorBytes());
    for (long b : new long[] {MB, floor - 1}) {
      assertThatThrownBy(() -> new ExactPlanner(8).plan(g, ctx(g, b)))
          .isInstanceOfSatisfying(PlanningException.class,
              e -> assertThat(e.smallestBudgetBytes()).isEqualTo(floor))
          .hasMessageContaining("INFEASIBLE");
    }
    assertThat(floor).isLessThan(peak(g));
  }
}
