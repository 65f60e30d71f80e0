package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;

/**
 * TFLMS's swap planner: tensors whose consumers lie more than {@code swapout_threshold} levels
 * after their producer are swapped, with swap-ins triggered {@code swapin_ahead} levels early;
 * the parameters left at -1 are auto-tuned against the budget ({@link SwapAutoTuner}). The
 * chosen parameters are recorded in the plan.
 */
final class TflmsPlanner implements Planner {
  static final String NAME = "tflms-swap";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    SwapParams p = ctx.params();
    if (p.autoTune() && !ctx.budget().isSet()) {
      throw new IllegalArgumentException("auto-tuning needs a budget: set a budget or the "
          + "parameters swapout_threshold, swapin_ahead and swapin_groupby");
    }
    Budget b = ctx.budget().isSet() ? ctx.budget() : Budget.none();
    SwapAutoTuner.Result r = SwapAutoTuner.tune(g, p, ctx.policy(), b);
    long before = SwapAutoTuner.simulatePeak(g, SwapPlan.empty(p));
    if (!r.lmsNeeded()) {
      return MemoryPlan.unchanged(NAME, g, ctx, before).withParams(r.plan().params());
    }
    return MemoryPlan.of(NAME, g, RecomputePlan.empty(), r.plan(), before, r.predictedPeak(),
        r.simulations(), ctx).withParams(r.plan().params());
  }
}
