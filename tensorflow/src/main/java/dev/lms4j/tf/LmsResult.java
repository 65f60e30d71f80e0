package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.schedule.Scheduling;
import org.tensorflow.proto.GraphDef;

/**
 * The outcome of {@link Lms#rewrite}.
 *
 * @param graphDef          the rewritten graph (the input itself when nothing was changed)
 * @param plan              the swap plan, with the parameters used
 * @param model             the graph model of the input
 * @param stats             sizes of the input graph
 * @param predictedPeakBefore simulated peak of the input, bytes
 * @param predictedPeakAfter  simulated peak of the rewritten graph, bytes
 * @param rewritten         false when LMS was not necessary or the graph was already rewritten
 * @param planningMs        wall time of import, planning and rewrite
 * @param addedNodes        GraphDef nodes added
 * @param recompute         the recomputation plan (empty for swapping)
 * @param scheduling        the scheduling step run before planning (null when none changed
 *                          the graph); its peaks are the simulated peak before and after it
 * @param planner           which planner made the plan ({@code hybrid}, {@code hybrid-swap},
 *                          {@code tflms-swap}, {@code recompute+tflms-swap}), or null when the
 *                          caller can tell from the strategy
 */
public record LmsResult(GraphDef graphDef, SwapPlan plan, DataflowGraph model, GraphStats stats,
    long predictedPeakBefore, long predictedPeakAfter, boolean rewritten, long planningMs,
    int addedNodes, RecomputePlan recompute, Scheduling.Result scheduling, String planner) {

  /** A result naming no planner. */
  public LmsResult(GraphDef graphDef, SwapPlan plan, DataflowGraph model, GraphStats stats,
      long predictedPeakBefore, long predictedPeakAfter, boolean rewritten, long planningMs,
      int addedNodes, RecomputePlan recompute, Scheduling.Result scheduling) {
    this(graphDef, plan, model, stats, predictedPeakBefore, predictedPeakAfter, rewritten,
        planningMs, addedNodes, recompute, scheduling, null);
  }

  /** The same result, naming the planner that made it. */
  /** The same result with another planning time (the wall time of every candidate tried). */
  public LmsResult withPlanningMs(long ms) {
    return new LmsResult(graphDef, plan, model, stats, predictedPeakBefore, predictedPeakAfter,
        rewritten, ms, addedNodes, recompute, scheduling, planner);
  }

  public LmsResult withPlanner(String name) {
    return new LmsResult(graphDef, plan, model, stats, predictedPeakBefore, predictedPeakAfter,
        rewritten, planningMs, addedNodes, recompute, scheduling, name);
  }

  /** A result without a scheduling step. */
  public LmsResult(GraphDef graphDef, SwapPlan plan, DataflowGraph model, GraphStats stats,
      long predictedPeakBefore, long predictedPeakAfter, boolean rewritten, long planningMs,
      int addedNodes, RecomputePlan recompute) {
    this(graphDef, plan, model, stats, predictedPeakBefore, predictedPeakAfter, rewritten,
        planningMs, addedNodes, recompute, null);
  }

  /** The same result with the scheduling step that preceded planning. */
  public LmsResult withScheduling(Scheduling.Result s) {
    return new LmsResult(graphDef, plan, model, stats, predictedPeakBefore, predictedPeakAfter,
        rewritten || s.changed(), planningMs, addedNodes, recompute, s, planner);
  }

  /** A result of swapping (no recomputation). */
  public LmsResult(GraphDef graphDef, SwapPlan plan, DataflowGraph model, GraphStats stats,
      long predictedPeakBefore, long predictedPeakAfter, boolean rewritten, long planningMs,
      int addedNodes) {
    this(graphDef, plan, model, stats, predictedPeakBefore, predictedPeakAfter, rewritten,
        planningMs, addedNodes, RecomputePlan.empty());
  }
}
