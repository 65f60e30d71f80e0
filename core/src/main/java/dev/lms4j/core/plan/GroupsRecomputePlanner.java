package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;

/**
 * Grappler-style recomputation: connected groups of cheap forward ops read by the backward pass
 * are recomputed there, largest saving first, while the simulated peak is above the budget's
 * limit; without a budget, every such group ({@link RecomputePlanner}).
 */
final class GroupsRecomputePlanner implements Planner {
  static final String NAME = "grappler-recompute";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    long before = RecomputePlanner.peak(g, RecomputePlan.empty());
    if (!ctx.budget().isSet()) {
      RecomputePlan plan = RecomputePlanner.heuristic(g);
      return MemoryPlan.of(NAME, g, plan, SwapPlan.empty(ctx.params()), before,
          RecomputePlanner.peak(g, plan), 2, ctx);
    }
    RecomputePlanner.Result r = RecomputePlanner.underBudget(g, ctx.budget().bytes(),
        ctx.budget().memRatio());
    if (!r.needed()) {
      return MemoryPlan.unchanged(NAME, g, ctx, before);
    }
    return MemoryPlan.of(NAME, g, r.plan(), SwapPlan.empty(ctx.params()), before,
        r.predictedPeak(), r.simulations(), ctx);
  }
}
