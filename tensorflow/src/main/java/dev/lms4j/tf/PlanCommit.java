package dev.lms4j.tf;

import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.RecomputePlan;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
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
  private static final Logger LOG = LoggerFactory.getLogger(PlanCommit.class);

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

  /** Logs what a committed plan does, TFLMS's parameter set included when it has one. */
  static void log(MemoryPlan plan, LmsMode mode, int added, long planningMs,
      SwapRewriter.Mechanism mechanism) {
    MemoryPlan.Estimate e = plan.estimate();
    if (!plan.needed()) {
      LOG.info("[LMS][0] LMS is not necessary (mode {}, simulated peak {} MiB).",
          mode.cliName(), Budget.mib(e.peakBefore()));
      return;
    }
    SwapParams p = plan.params();
    if (p != null && !plan.swaps().isEmpty()) {
      LOG.info("[LMS][0] LMS will use the following parameter set:");
      LOG.info("[LMS][0]   sync_mode: {}", p.syncMode());
      LOG.info("[LMS][0]   swapout_threshold: {}", p.swapoutThreshold());
      String ignored = p.syncMode() >= 2 ? " (ignored since sync_mode is " + p.syncMode() + ")"
          : "";
      LOG.info("[LMS][0]   swapin_ahead: {}{}", p.swapinAhead(), ignored);
      LOG.info("[LMS][0]   swapin_groupby: {}{}", p.swapinGroupby(), ignored);
    }
    if (!plan.swaps().isEmpty()) {
      LOG.info("[LMS][0] Swap mechanism: {}", mechanism);
    }
    var rp = plan.recompute();
    LOG.info("[LMS][0] {} ({}): added {} operations: recomputing {} operations in {} groups, "
        + "{} swap-outs ({} MiB) and {} swap-ins; predicted peak {} MiB -> {} MiB, step {} ms "
        + "-> {} ms; planning took {} ms", plan.planner(), mode.cliName(), added, rp.clonedOps(),
        rp.groups().size(), plan.swaps().swapOuts().size(),
        Budget.mib(plan.swaps().swapOutBytes()), plan.swaps().swapInCount(),
        Budget.mib(e.peakBefore()), Budget.mib(e.peakAfter()),
        String.format("%.1f", e.stepMsBefore()), String.format("%.1f", e.stepMsAfter()),
        planningMs);
  }
}
