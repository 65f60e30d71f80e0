package dev.lms4j.optimal;

import dev.lms4j.core.plan.PlanCosts;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.HybridPlanner;
import dev.lms4j.core.plan.PlanningContext;
import dev.lms4j.core.plan.TensorPolicy;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

class OptimalPlannerTest {
  private static final Logger LOG = LoggerFactory.getLogger(OptimalPlannerTest.class);
  private static final long MB = 1 << 20;
  private static final CostModel CM = CostModel.defaults();

  private static long peak(DataflowGraph g) {
    return SwapAutoTuner.simulatePeak(g, SwapPlan.empty(SwapParams.defaults()));
  }

  /** The problem's peak without LMS is the simulator's (same schedule, same accounting). */
  @Test
  void theProblemAccountsMemoryAsTheSimulator() {
    DataflowGraph g = SyntheticGraphs.trainingChain(12, MB, 64 * 1024);
    OptimalPlanner.Problem p = OptimalPlanner.problem(g, OptimalPlanner.Options.of(1L << 30));
    assertThat(p.peakWithoutLms()).isEqualTo(peak(g));
  }

  /** A budget the graph fits changes nothing: the optimum is the step without LMS. */
  @Test
  void aGenerousBudgetCostsNothing() {
    DataflowGraph g = SyntheticGraphs.trainingChain(6, MB, 64 * 1024);
    OptimalPlanner.Result r = OptimalPlanner.solve(g, OptimalPlanner.Options.of(1L << 30));
    assertThat(r.optimal()).isTrue();
    assertThat(r.overheadMs()).isCloseTo(0, within(1e-9));
  }

  /** On tiny graphs the solver's optimum equals exhaustive enumeration of the same model. */
  @Test
  void equalsBruteForceOnTinyGraphs() {
    int checked = 0;
    for (int layers = 2; layers <= 4; layers++) {
      DataflowGraph g = SyntheticGraphs.trainingChain(layers, MB, 64 * 1024);
      long before = peak(g);
      for (double f : new double[] {0.95, 0.8, 0.7, 0.6}) {
        long budget = (long) (before * f / 0.8);
        OptimalPlanner.Options o = OptimalPlanner.Options.of(budget);
        OptimalPlanner.Problem p = OptimalPlanner.problem(g, o);
        double brute = BruteForce.minStepMs(p);
        OptimalPlanner.Result r = OptimalPlanner.solve(p, 30);
        if (Double.isInfinite(brute)) {
          assertThat(r.feasible()).as("layers %d, f %.2f", layers, f).isFalse();
        } else {
          assertThat(r.optimal()).isTrue();
          // objective coefficients are rounded to nanoseconds
          assertThat(r.stepMs()).as("layers %d, f %.2f", layers, f)
              .isCloseTo(brute, within(1e-4));
          checked++;
        }
      }
    }
    assertThat(checked).isGreaterThanOrEqualTo(4);
  }

  /**
   * On small graphs the optimum is at most every heuristic's predicted step time: the hybrid
   * planner (auto), its swap-only variant, grappler-style recompute groups and TFLMS. The
   * optimum is its decisions applied through lms4j's appliers and simulated ({@link ExactPlan}):
   * a model that promised more than the simulator grants would fail here, not pass.
   */
  @Test
  void optimumIsAtMostEveryHeuristic() {
    int compared = 0;
    for (int layers : new int[] {8, 16}) {
      DataflowGraph g = SyntheticGraphs.trainingChain(layers, MB, 64 * 1024);
      long before = peak(g);
      for (double f : new double[] {0.8, 0.6, 0.45}) {
        long budget = (long) (before * f / 0.8);
        PlanningContext ctx = PlanningContext.of(Budget.of(budget), TensorPolicy.builtin(g));
        ExactPlan opt = new ExactPlanner(8).solve(g, ctx);
        assertThat(opt.simulatedPeak()).as("layers %d, f %.2f", layers, f)
            .isLessThanOrEqualTo(ctx.budget().limit());
        double optMs = opt.plan().estimate().stepMsAfter();
        List<Double> heuristics = new ArrayList<>();
        try {
          HybridPlanner.Result h = HybridPlanner.plan(g, HybridPlanner.Options.of(budget));
          heuristics.add(h.predictedStepMs());
        } catch (PlanningException e) {
          LOG.info("auto: no plan at {}", budget);
        }
        try {
          HybridPlanner.Result h = HybridPlanner.plan(g, HybridPlanner.Options.of(budget)
              .swapOnly());
          heuristics.add(h.predictedStepMs());
        } catch (PlanningException e) {
          LOG.info("swap: no plan at {}", budget);
        }
        try {
          RecomputePlan rp = RecomputePlanner.underBudget(g, budget, 0.8).plan();
          heuristics.add(PlanCosts.stepMs(CM, g, SwapPlan.empty(SwapParams.defaults()), rp));
        } catch (PlanningException e) {
          LOG.info("remat: no plan at {}", budget);
        }
        try {
          SwapPlan sp = SwapAutoTuner.tune(g, SwapParams.defaults(), budget, 0.8).plan();
          heuristics.add(PlanCosts.stepMs(CM, g, sp, RecomputePlan.empty()));
        } catch (PlanningException e) {
          LOG.info("tflms: no plan at {}", budget);
        }
        for (double h : heuristics) {
          assertThat(optMs).as("layers %d, f %.2f", layers, f)
              .isLessThanOrEqualTo(h + 1e-4); // coefficients rounded to ns
          compared++;
        }
      }
    }
    assertThat(compared).isGreaterThanOrEqualTo(8);
  }

  /**
   * How far the hybrid planner (auto) is from the optimum: its predicted overhead (step time
   * above the step without LMS) within 10% of the proven optimal overhead on the 54-op chain.
   * Only proven optima count: with one worker and a deterministic limit CP-SAT's best solution
   * on 199 ops was worse than auto's plan (2.92 vs 1.70 ms at 50%), a comparison that could not
   * fail; that size belongs to the benchmark.
   */
  @Test
  void autoIsWithinTenPercentOfOptimal() {
    for (int layers : new int[] {10}) {
      DataflowGraph g = SyntheticGraphs.trainingChain(layers, MB, 64 * 1024);
      long before = peak(g);
      for (double f : new double[] {0.5, 0.7}) {
        long budget = (long) (before * f / 0.8);
        // one worker, fixed seed, a limit in CP-SAT's deterministic time: the 54-op problems
        // are proven optimal within 8 units (README: "proven optimal at 54 ops")
        ExactPlan applied = new ExactPlanner(8).solve(g,
            PlanningContext.of(Budget.of(budget), TensorPolicy.builtin(g)));
        OptimalPlanner.Result opt = applied.solution();
        // the optimum as applied and simulated: it fits and costs the solver's figure
        assertThat(applied.simulatedPeak()).isLessThanOrEqualTo((long) (budget * 0.8));
        assertThat(applied.plan().estimate().stepMsAfter()).isCloseTo(opt.stepMs(),
            within(1e-4));
        HybridPlanner.Result h = HybridPlanner.plan(g, HybridPlanner.Options.of(budget));
        LOG.info("gap: {} ops, budget {} of the peak: auto overhead {} ms, optimal {} ms ({})",
            g.size(), f, String.format("%.3f", h.overheadMs()),
            String.format("%.3f", opt.overheadMs()), opt.status());
        LOG.info("optimal: {}", opt.decisions());
        LOG.info("auto: swaps {}, recomputed {}", h.swaps().swapOuts().stream()
            .map(so -> so.tensorName() + " trig " + so.swapIns().get(0).triggers()).toList(),
            h.recompute().groups().stream().map(gr -> gr.ops() + " trig " + gr.triggers())
            .toList());
        assertThat(g.size()).isEqualTo(54);
        assertThat(opt.status()).as("54 ops at %.2f", f).isEqualTo("OPTIMAL");
        // the bound meets the solution when it is proven
        assertThat(opt.boundMs()).isCloseTo(opt.stepMs(), within(1e-6));
        assertThat(h.overheadMs()).as("%d ops at %.2f", g.size(), f)
            .isLessThanOrEqualTo(opt.overheadMs() * 1.10 + 1e-4);
      }
    }
  }
}
