package dev.lms4j.core.plan;

import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.Tier;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Everything a {@link Planner} plans with, besides the graph: the budget, the cost model plans
 * are compared by, TFLMS's parameters (their tier says where swapped tensors go), the tensor
 * policy, and the smallest tensor worth recomputing.
 *
 * <pre>{@code
 * PlanningContext ctx = PlanningContext.of(Budget.of(256L << 20), TensorPolicy.builtin(g));
 * MemoryPlan plan = LmsMode.AUTO.planner().plan(g, ctx);
 * }</pre>
 *
 * @param budget       the device budget and memory ratio
 * @param costModel    predicts step times (the active swap path's bandwidths)
 * @param params       TFLMS's parameters (auto-tuned where -1) and the tier
 * @param policy       what may be swapped or recomputed, for this graph
 * @param minRematBytes tensors smaller than this are never rematerialized (XLA-style modes)
 * @param decisionsDump where a planner that can writes its per-op decisions, or null
 */
public record PlanningContext(Budget budget, CostModel costModel, SwapParams params,
    TensorPolicy policy, long minRematBytes, Path decisionsDump) {

  public PlanningContext {
    Objects.requireNonNull(budget);
    Objects.requireNonNull(costModel);
    Objects.requireNonNull(params);
    Objects.requireNonNull(policy);
    if (minRematBytes < 0) {
      throw new IllegalArgumentException("minimum remat size must be >= 0");
    }
  }

  /** A context with the default cost model and TFLMS parameters (auto-tuned, host tier). */
  public static PlanningContext of(Budget budget, TensorPolicy policy) {
    return new PlanningContext(budget, CostModel.defaults(), SwapParams.defaults(), policy, 0,
        null);
  }

  /** Where swapped tensors go. */
  public Tier tier() {
    return params.tier();
  }

  /** The same context with another budget. */
  public PlanningContext withBudget(Budget b) {
    return new PlanningContext(b, costModel, params, policy, minRematBytes, decisionsDump);
  }

  /** The same context with other TFLMS parameters. */
  public PlanningContext withParams(SwapParams p) {
    return new PlanningContext(budget, costModel, p, policy, minRematBytes, decisionsDump);
  }

  /** The same context with another cost model. */
  public PlanningContext withCostModel(CostModel cm) {
    return new PlanningContext(budget, cm, params, policy, minRematBytes, decisionsDump);
  }

  /** The same context with another minimum remat size. */
  public PlanningContext withMinRematBytes(long bytes) {
    return new PlanningContext(budget, costModel, params, policy, bytes, decisionsDump);
  }

  /** The same context writing decisions to {@code file}. */
  public PlanningContext withDecisionsDump(Path file) {
    return new PlanningContext(budget, costModel, params, policy, minRematBytes, file);
  }

  /** Throws when no budget is set: for planners that need one. */
  public Budget requireBudget(String planner) {
    if (!budget.isSet()) {
      throw new IllegalArgumentException("the " + planner + " planner needs a budget");
    }
    return budget;
  }
}
