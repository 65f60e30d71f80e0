package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;

/**
 * A memory planner: given a graph and a {@link PlanningContext} (budget, cost model, tier, tensor
 * policy), it chooses what to swap and what to recompute and returns one {@link MemoryPlan}.
 * Every planner reads what it may touch from the context's {@link TensorPolicy} only, so user
 * constraints hold in every mode. Planners are stateless: one instance may plan many graphs.
 *
 * <p>A new planner is one class implementing this interface and one entry in {@link LmsMode}:
 *
 * <pre>{@code
 * final class LargestActivations implements Planner {
 *   public String name() { return "largest"; }
 *   public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
 *     ... // choose swaps among ctx.policy().maySwap(...) tensors
 *     return MemoryPlan.of(name(), g, RecomputePlan.empty(), swaps, ctx);
 *   }
 * }
 * }</pre>
 */
public interface Planner {
  /** The planner's name, as reports show it. */
  String name();

  /**
   * Plans {@code g} under the context's budget. A plan that is not needed (the graph fits as it
   * is) is {@link MemoryPlan#unchanged}.
   *
   * @throws PlanningException when no plan fits; it names the smallest budget that could work
   */
  MemoryPlan plan(DataflowGraph g, PlanningContext ctx);
}
