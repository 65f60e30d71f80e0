package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The baseline composite: recompute cheap groups first (grappler-style), swap what still does not
 * fit with the auto-tuned TFLMS planner; or swap alone when the cost model predicts that faster,
 * or when recompute + swap does not fit (recomputed groups keep their inputs alive until the
 * backward pass, so at the tightest budgets swapping alone can go lower). Needs a budget.
 */
final class BaselinePlanner implements Planner {
  private static final Logger LOG = LoggerFactory.getLogger(BaselinePlanner.class);

  @Override
  public String name() {
    return "recompute+tflms-swap";
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    Budget b = ctx.requireBudget(name());
    SwapParams p = ctx.params();
    RecomputePlanner.Result rr = RecomputePlanner.bestEffort(g, b.bytes(), b.memRatio());
    long before = RecomputePlanner.peak(g, RecomputePlan.empty());
    if (rr.predictedPeak() <= b.limit()) {
      if (rr.plan().isEmpty()) {
        return MemoryPlan.unchanged(GroupsRecomputePlanner.NAME, g, ctx, before);
      }
      LOG.info("[LMS][0] Recomputation alone fits: {} operations in {} groups; predicted peak "
          + "{} MiB -> {} MiB", rr.plan().clonedOps(), rr.plan().groups().size(),
          Budget.mib(before), Budget.mib(rr.predictedPeak()));
      return MemoryPlan.of(GroupsRecomputePlanner.NAME, g, rr.plan(), SwapPlan.empty(p),
          before, rr.predictedPeak(), rr.simulations(), ctx);
    }
    DataflowGraph recomputed = RecomputeApplier.apply(g, rr.plan());
    RecomputePlan recompute = rr.plan();
    SwapAutoTuner.Result tuned;
    try {
      tuned = SwapAutoTuner.tune(recomputed, p, ctx.policy(), b);
      try {
        SwapAutoTuner.Result swapOnly = SwapAutoTuner.tune(g, p, ctx.policy(), b);
        double both = PlanCosts.stepMs(ctx.costModel(), g, tuned.plan(), recompute);
        double alone = PlanCosts.stepMs(ctx.costModel(), g, swapOnly.plan(),
            RecomputePlan.empty());
        LOG.info("[LMS][0] Predicted step time: recompute + swap {} ms, swap alone {} ms",
            String.format("%.1f", both), String.format("%.1f", alone));
        if (alone < both) {
          tuned = swapOnly;
          recompute = RecomputePlan.empty();
        }
      } catch (PlanningException e) {
        LOG.debug("swap alone does not fit: {}", e.getMessage());
      }
    } catch (PlanningException e) {
      LOG.info("[LMS][0] Recompute + swap does not fit ({}); trying swap alone", e.getMessage());
      recompute = RecomputePlan.empty();
      tuned = SwapAutoTuner.tune(g, p, ctx.policy(), b);
    }
    String name = recompute.isEmpty() ? TflmsPlanner.NAME : name();
    return MemoryPlan.of(name, g, recompute, tuned.plan(), before, tuned.predictedPeak(),
        rr.simulations() + tuned.simulations(), ctx).withParams(tuned.plan().params());
  }
}
