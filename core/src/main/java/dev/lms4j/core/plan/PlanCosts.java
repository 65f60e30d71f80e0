package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.Tier;

/**
 * What a plan costs under a {@link CostModel}: transfers, recomputation and the predicted step.
 * It lives beside the plans (not in the cost model) so that {@code core.memory} does not depend
 * on {@code core.plan}.
 *
 * <pre>{@code
 * double ms = PlanCosts.stepMs(PlanCosts, CostModel.defaults(), graph, swapPlan, recomputePlan);
 * }</pre>
 */
public final class PlanCosts {
  private PlanCosts() {}

  /** Time all transfers of a plan take back to back, milliseconds (tier of its parameters). */
  public static double swapMs(CostModel cm, SwapPlan plan) {
    Tier tier = plan.params().tier();
    double us = 0;
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      us += (1 + so.swapIns().size()) * cm.transferUs(so.bytes(), tier);
    }
    return us / 1000;
  }

  /** Time the clones of a plan add, milliseconds. */
  public static double recomputeMs(CostModel cm, DataflowGraph g, RecomputePlan plan) {
    double us = 0;
    for (RecomputePlan.Group gr : plan.groups()) {
      for (String name : gr.ops()) {
        us += cm.opUs(g, g.opOrThrow(name));
      }
    }
    return us / 1000;
  }

  /**
   * Predicted step time of {@code g} with both plans applied, milliseconds. The swap plan's
   * names refer to {@code g} with the recompute plan applied (as {@link MemoryPlan#applyTo}
   * applies them).
   */
  public static double stepMs(CostModel cm, DataflowGraph g, SwapPlan swaps,
      RecomputePlan recompute) {
    double compute = cm.computeMs(g) + recomputeMs(cm, g, recompute);
    if (!cm.overlap() || swaps.isEmpty()) {
      return compute + swapMs(cm, swaps);
    }
    DataflowGraph r = PlanApplier.apply(RecomputeApplier.apply(g, recompute), swaps);
    return compute + cm.unhiddenMs(r, swaps.params().tier());
  }
}
