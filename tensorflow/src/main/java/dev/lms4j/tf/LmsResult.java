package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
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
 */
public record LmsResult(GraphDef graphDef, SwapPlan plan, DataflowGraph model, GraphStats stats,
    long predictedPeakBefore, long predictedPeakAfter, boolean rewritten, long planningMs,
    int addedNodes, RecomputePlan recompute) {

  /** A result of swapping (no recomputation). */
  public LmsResult(GraphDef graphDef, SwapPlan plan, DataflowGraph model, GraphStats stats,
      long predictedPeakBefore, long predictedPeakAfter, boolean rewritten, long planningMs,
      int addedNodes) {
    this(graphDef, plan, model, stats, predictedPeakBefore, predictedPeakAfter, rewritten,
        planningMs, addedNodes, RecomputePlan.empty());
  }
}
