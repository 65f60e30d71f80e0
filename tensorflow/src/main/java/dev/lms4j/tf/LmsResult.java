package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.schedule.Scheduling;
import java.util.List;
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
 * @param preRewrites         what the rewrites before planning ({@link GradientSums},
 *                            {@link OptimizerEdges}, {@link InitConstants}) changed in the
 *                            graph returned
 * @param initLayout          the order init creates the variables in, where lms4j changed it
 *                            ({@link InitOrder}), else null
 */
public record LmsResult(GraphDef graphDef, MemoryPlan memoryPlan, DataflowGraph model,
    GraphStats stats, long predictedPeakBefore, long planningMs, int addedNodes,
    Scheduling.Result scheduling, PreRewrites preRewrites, InitLayout initLayout) {

  /**
   * The order init was made to create the variables in ({@link InitOrder}).
   *
   * @param last        the variables created last, in this order
   * @param primerBytes the primer allocated before them (0: none)
   * @param primerFirst the primer is allocated before every other variable instead
   * @param needBefore  the allocator model's need with init in the graph's order, bytes
   * @param needAfter   its need with this order, bytes
   */
  public record InitLayout(List<String> last, long primerBytes, boolean primerFirst,
      long needBefore, long needAfter) {
    public InitLayout {
      last = List.copyOf(last);
    }

    /**
     * For a log line: {@code "table created last, after a 8 MiB primer made before the other
     * variables, so that TensorFlow's allocator cuts their regions to what is left of the
     * budget; the allocator model's need 70 -> 57 MiB"}.
     */
    public String describe() {
      String primer = primerBytes <= 0 ? "" : String.format(java.util.Locale.ROOT,
          ", after a %.0f MiB primer%s", primerBytes / 1048576.0,
          primerFirst ? " made before the other variables" : "");
      return String.join(", ", last) + " created last" + primer + ", so that TensorFlow's "
          + "allocator cuts their regions to what is left of the budget; the allocator model's "
          + "need " + dev.lms4j.core.plan.Budget.mibUp(needBefore) + " -> "
          + dev.lms4j.core.plan.Budget.mibUp(needAfter) + " MiB";
    }
  }

  /** A result whose init is in the graph's order. */
  public LmsResult(GraphDef graphDef, MemoryPlan memoryPlan, DataflowGraph model,
      GraphStats stats, long predictedPeakBefore, long planningMs, int addedNodes,
      Scheduling.Result scheduling, PreRewrites preRewrites) {
    this(graphDef, memoryPlan, model, stats, predictedPeakBefore, planningMs, addedNodes,
        scheduling, preRewrites, null);
  }

  /**
   * What the rewrites run before planning changed (all zero when none ran or none was kept).
   *
   * @param gradientSums          n-input {@code AddN}s turned into running accumulations
   * @param optimizerEdgesRemoved optimizer control edges removed ({@link OptimizerEdges})
   * @param optimizerEdgesAdded   control edges added to keep a variable's reads before its update
   * @param peakAfter             simulated peak of the graph after them (bytes; 0 for none)
   * @param initConstants         initializer {@code Fill}s kept from constant folding
   *                              ({@link InitConstants})
   * @param initConstantBytes     those Fills' output bytes together
   * @param sparseUpdates         dense table updates made sparse ({@link SparseUpdates})
   * @param sparseUpdateBytes     the dense gradients' bytes a step no longer computes
   * @param offloadedSlots        optimizer slots kept on the host ({@link SlotOffload})
   * @param offloadedBytes        their bytes
   * @param offloadedWeights      weights kept on the host between their reads
   * @param offloadedWeightBytes  their bytes
   */
  public record PreRewrites(int gradientSums, int optimizerEdgesRemoved,
      int optimizerEdgesAdded, long peakAfter, int initConstants, long initConstantBytes,
      int sparseUpdates, long sparseUpdateBytes, int offloadedSlots, long offloadedBytes,
      int offloadedWeights, long offloadedWeightBytes) {
    /** Nothing rewritten. */
    public static final PreRewrites NONE = new PreRewrites(0, 0, 0, 0);

    /**
     * Pre-rewrites without {@link InitConstants}.
     *
     * @param gradientSums          n-input {@code AddN}s turned into running accumulations
     * @param optimizerEdgesRemoved optimizer control edges removed
     * @param optimizerEdgesAdded   control edges added to keep a variable's reads first
     * @param peakAfter             simulated peak of the graph after them (bytes; 0 for none)
     */
    public PreRewrites(int gradientSums, int optimizerEdgesRemoved, int optimizerEdgesAdded,
        long peakAfter) {
      this(gradientSums, optimizerEdgesRemoved, optimizerEdgesAdded, peakAfter, 0, 0, 0, 0, 0,
          0, 0, 0);
    }

    /** As the canonical constructor, without offloaded slots ({@link SlotOffload}). */
    public PreRewrites(int gradientSums, int optimizerEdgesRemoved, int optimizerEdgesAdded,
        long peakAfter, int initConstants, long initConstantBytes, int sparseUpdates,
        long sparseUpdateBytes) {
      this(gradientSums, optimizerEdgesRemoved, optimizerEdgesAdded, peakAfter, initConstants,
          initConstantBytes, sparseUpdates, sparseUpdateBytes, 0, 0, 0, 0);
    }

    /** Whether any of them changed the graph. */
    public boolean changed() {
      return gradientSums > 0 || optimizerEdgesRemoved > 0 || optimizerEdgesAdded > 0
          || initConstants > 0 || sparseUpdates > 0 || offloadedSlots > 0
          || offloadedWeights > 0;
    }
  }

  /** Null pre-rewrites read as {@link PreRewrites#NONE}. */
  public LmsResult {
    preRewrites = preRewrites == null ? PreRewrites.NONE : preRewrites;
  }

  /** A result without rewrites before planning. */
  public LmsResult(GraphDef graphDef, MemoryPlan memoryPlan, DataflowGraph model,
      GraphStats stats, long predictedPeakBefore, long planningMs, int addedNodes,
      Scheduling.Result scheduling) {
    this(graphDef, memoryPlan, model, stats, predictedPeakBefore, planningMs, addedNodes,
        scheduling, PreRewrites.NONE);
  }

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
        : scheduling != null ? scheduling.peakAfter()
        : preRewrites.changed() ? preRewrites.peakAfter() : predictedPeakBefore;
  }

  /**
   * True when the graph was changed (a plan, a scheduling step, a rewrite before planning or the
   * order of init).
   */
  public boolean rewritten() {
    return memoryPlan.needed() || scheduling != null || preRewrites.changed()
        || initLayout != null;
  }

  /** The planner that made the plan, or null when no plan was needed. */
  public String planner() {
    return memoryPlan.needed() ? memoryPlan.planner() : null;
  }

  /** The same result with another graph (the same plan, e.g. with its order enforced). */
  public LmsResult withGraphDef(GraphDef gd) {
    return new LmsResult(gd, memoryPlan, model, stats, predictedPeakBefore, planningMs,
        addedNodes, scheduling, preRewrites, initLayout);
  }

  /** The same result with another planning time. */
  public LmsResult withPlanningMs(long ms) {
    return new LmsResult(graphDef, memoryPlan, model, stats, predictedPeakBefore, ms, addedNodes,
        scheduling, preRewrites, initLayout);
  }
}
