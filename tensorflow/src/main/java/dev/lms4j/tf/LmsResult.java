package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.schedule.Scheduling;
import org.tensorflow.proto.GraphDef;

/**
 * What {@link Lms#rewrite} produced: the rewritten graph, the plan committed to it, and the
 * model and statistics of the graph it was planned on.
 *
 * @param graphDef            the rewritten graph (the input when nothing was needed)
 * @param memoryPlan          the plan (its estimate holds the predicted peaks and step times)
 * @param model               lms4j's model of the graph planned (after scheduling, if any)
 * @param stats               statistics of the imported graph
 * @param predictedPeakBefore simulated peak of the graph as given, before scheduling
 * @param planningMs          time taken, milliseconds
 * @param addedNodes          nodes the rewrite added
 * @param scheduling          the scheduling step's result when it changed the graph, else null
 */
public record LmsResult(GraphDef graphDef, MemoryPlan memoryPlan, DataflowGraph model,
    GraphStats stats, long predictedPeakBefore, long planningMs, int addedNodes,
    Scheduling.Result scheduling) {

  /** The swaps (names refer to the graph with {@link #recompute()} applied). */
  public SwapPlan plan() {
    return memoryPlan.swaps();
  }

  /** Every recomputed group (all stages). */
  public RecomputePlan recompute() {
    return memoryPlan.recompute();
  }

  /** Simulated peak with the plan. */
  public long predictedPeakAfter() {
    return memoryPlan.needed() ? memoryPlan.estimate().peakAfter()
        : scheduling != null ? scheduling.peakAfter() : predictedPeakBefore;
  }

  /** True when the graph was changed (a plan or a scheduling step). */
  public boolean rewritten() {
    return memoryPlan.needed() || scheduling != null;
  }

  /** The planner that made the plan, or null when no plan was needed. */
  public String planner() {
    return memoryPlan.needed() ? memoryPlan.planner() : null;
  }

  /** The same result with another planning time. */
  public LmsResult withPlanningMs(long ms) {
    return new LmsResult(graphDef, memoryPlan, model, stats, predictedPeakBefore, ms, addedNodes,
        scheduling);
  }
}
