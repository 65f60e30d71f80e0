package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;

/**
 * The cost-based planner ({@link HybridPlanner}): per tensor keep, swap (with a swap-in trigger)
 * or recompute, minimising the predicted step time under the budget; or the same restricted to
 * swapping. Needs a budget.
 */
final class HybridCostPlanner implements Planner {
  private final boolean recompute;

  HybridCostPlanner(boolean recompute) {
    this.recompute = recompute;
  }

  @Override
  public String name() {
    return recompute ? "hybrid" : "hybrid-swap";
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    Budget b = ctx.requireBudget(name());
    HybridPlanner.Options o = new HybridPlanner.Options(b.bytes(), b.memRatio(),
        ctx.costModel(), ctx.tier(), true, recompute, 12, 400).withPolicy(ctx.policy());
    HybridPlanner.Result r = HybridPlanner.plan(g, o);
    if (!r.needed()) {
      return MemoryPlan.unchanged(name(), g, ctx, r.peakBefore());
    }
    return new MemoryPlan(name(), java.util.List.of(r.recompute()), r.swaps(),
        new MemoryPlan.Estimate(r.peakBefore(), r.predictedPeak(), r.baseStepMs(),
            r.predictedStepMs(), r.simulations()), null);
  }
}
