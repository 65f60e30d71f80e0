package dev.lms4j.tf;

import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.RecomputePlan;
import java.nio.file.Path;
import org.tensorflow.proto.GraphDef;

/**
 * Commits a {@link MemoryPlan} to a GraphDef: its recompute stages in order (clones and
 * re-pointed readers, {@link RecomputeRewriter}), then its swaps ({@link SwapRewriter}), whose
 * names refer to the graph with the clones in it. The one place a plan becomes a graph, as
 * {@link MemoryPlan#applyTo} is on lms4j's model.
 *
 * <pre>{@code
 * GraphDef out = PlanCommit.apply(gd, plan, Tier.HOST, null, "train_op", mechanism);
 * }</pre>
 */
public final class PlanCommit {
  private PlanCommit() {}

  /**
   * The rewritten graph.
   *
   * @param gd        the graph the plan was made for
   * @param plan      the plan
   * @param tier      where swapped tensors go
   * @param swapDir   the disk tier's directory (null for other tiers)
   * @param trainOp   the op a step runs (disk-tier cleanup waits on it), or null
   * @param mechanism how swaps move
   */
  public static GraphDef apply(GraphDef gd, MemoryPlan plan, Tier tier, Path swapDir,
      String trainOp, SwapRewriter.Mechanism mechanism) {
    GraphDef out = gd;
    for (RecomputePlan stage : plan.recomputeStages()) {
      out = RecomputeRewriter.rewrite(out, stage);
    }
    if (!plan.swaps().isEmpty()) {
      out = SwapRewriter.rewrite(out, plan.swaps(), tier, swapDir, trainOp, mechanism);
    }
    return out;
  }
}
