package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;

/**
 * Chen et al.'s sqrt(n) checkpointing, a baseline ({@link SqrtCheckpointPlanner}): it ignores the
 * budget (the floor check still applies).
 */
final class SqrtPlanner implements Planner {
  static final String NAME = "sqrt-checkpoint";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    RecomputePlan plan = SqrtCheckpointPlanner.plan(g);
    long before = RecomputePlanner.peak(g, RecomputePlan.empty());
    return MemoryPlan.of(NAME, g, plan, SwapPlan.empty(ctx.params()), before,
        RecomputePlanner.peak(g, plan), 2, ctx);
  }
}
