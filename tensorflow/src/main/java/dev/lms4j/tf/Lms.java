package dev.lms4j.tf;

import dev.lms4j.core.plan.PlanCosts;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.plan.HybridPlanner;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.plan.Rematerializer;
import dev.lms4j.core.plan.SqrtCheckpointPlanner;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.schedule.Scheduling;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;

/**
 * Large Model Support for a TensorFlow Java graph: rewrites it with swap-outs and swap-ins so its
 * peak memory fits a budget. Use it before the session starts:
 *
 * <pre>{@code
 * Lms lms = Lms.builder().budget(512L << 20).build();
 * try (Graph rewritten = lms.run(graph);
 *      Session s = new Session(rewritten, lms.sessionConfig())) {
 *   ...
 * }
 * }</pre>
 *
 * TensorFlow Java cannot re-point the inputs of ops already in a {@link Graph}, so {@link
 * #run(Graph)} returns a new graph (which the caller must close) and leaves the original as it
 * was. With the three main TFLMS parameters left at -1 (the default) they are auto-tuned against
 * the budget; when the graph fits without LMS, nothing is changed ("LMS is not necessary").
 */
public final class Lms {
  private static final Logger LOG = LoggerFactory.getLogger(Lms.class);

  private final long budgetBytes;
  private final SwapParams params;
  private final double memRatio;
  private final String backwardScope;
  private final java.util.SortedSet<String> recomputeOps;
  private final Path swapDir;
  private final Strategy strategy;
  private final CostModel costModel;
  private final RematMode rematMode;
  private final long smallNodeLimitBytes;
  private final Scheduling.Scheduler scheduler;
  private final Path rematDump;

  /** How the {@link Strategy#RECOMPUTE} strategy chooses ops (when no op has a hint). */
  public enum RematMode {
    /** Grappler-style groups of cheap ops, largest saving first (the default). */
    GROUPS,
    /** XLA's standard rematerialization ({@link Rematerializer.Mode#STANDARD}); needs a budget. */
    STANDARD,
    /** Path rematerialization ({@link Rematerializer.Mode#PATH}); needs a budget. */
    PATH
  }
  private final SwapPath swapPath;
  private final boolean swapOverlap;
  private SwapRewriter.Mechanism mechanism;

  /** What the rewrite does to save memory. */
  public enum Strategy {
    /** Swap tensors out and back in (TFLMS); the default. */
    SWAP,
    /**
     * Recompute cheap forward ops in the backward pass (grappler-style groups): the ops marked
     * {@code _recompute_hint} when there are any, else groups chosen to fit the budget, else
     * (no budget) every cheap group. With {@link Builder#rematMode} STANDARD or PATH, XLA-style
     * rematerialization ({@link Rematerializer}) chooses the ops instead, under the budget times
     * the memory ratio.
     */
    RECOMPUTE,
    /**
     * The cost-based hybrid planner ({@link HybridPlanner}): per tensor keep, swap (with a
     * chosen swap-in trigger) or recompute, minimising the step time the cost model predicts
     * under the budget. The baseline (cheap recompute groups, then the auto-tuned TFLMS planner
     * on the rest, or TFLMS alone) is planned too and kept when the cost model predicts it
     * faster; the log names the choice. Needs a budget.
     */
    AUTO,
    /** The hybrid planner restricted to swapping (per-tensor swaps and triggers). Needs a budget. */
    SWAP_ONLY,
    /**
     * Chen et al.'s sqrt(n) checkpointing, a baseline: about sqrt(n) forward ops are kept, the
     * rest (convolutions and matmuls included) are recomputed in the backward pass. Ignores the
     * budget except for the floor check.
     */
    SQRT
  }

  private Lms(Builder b) {
    this.budgetBytes = b.budgetBytes;
    this.params = b.params;
    this.memRatio = b.memRatio;
    this.backwardScope = b.backwardScope;
    this.recomputeOps = java.util.Collections.unmodifiableSortedSet(
        new java.util.TreeSet<>(b.recomputeOps));
    this.swapDir = b.swapDir;
    this.strategy = b.strategy;
    this.swapPath = b.swapPath;
    this.swapOverlap = b.swapOverlap;
    this.costModel = b.costModel;
    this.rematMode = b.rematMode;
    this.smallNodeLimitBytes = b.smallNodeLimitBytes;
    this.scheduler = b.scheduler;
    this.rematDump = b.rematDump;
    if (!recomputeOps.isEmpty() && strategy != Strategy.RECOMPUTE) {
      throw new IllegalArgumentException("ops named to recompute (recompute(...)) need the "
          + "RECOMPUTE strategy, not " + strategy);
    }
    if (strategy == Strategy.RECOMPUTE && rematMode != RematMode.GROUPS && budgetBytes <= 0
        && recomputeOps.isEmpty()) {
      throw new IllegalArgumentException("remat mode " + rematMode + " needs a budget");
    }
    if (params.tier() == Tier.DISK && swapDir == null) {
      throw new IllegalArgumentException("the disk tier needs a swap directory (swapDir)");
    }
    if ((strategy == Strategy.AUTO || strategy == Strategy.SWAP_ONLY) && budgetBytes <= 0) {
      throw new IllegalArgumentException("the " + strategy + " strategy needs a budget");
    }
    if (strategy == Strategy.SWAP && params.autoTune() && budgetBytes <= 0) {
      throw new IllegalArgumentException("auto-tuning needs a budget: set budget(bytes) or the "
          + "parameters swapout_threshold, swapin_ahead and swapin_groupby");
    }
  }

  /** A builder with TFLMS's defaults (auto-tuning) and no budget. */
  public static Builder builder() {
    return new Builder();
  }

  /** The parameters this instance plans with. */
  public SwapParams params() {
    return params;
  }

  /** The swap path asked for. */
  public SwapPath swapPath() {
    return swapPath;
  }

  /**
   * The mechanism swaps use in this JVM ({@link SwapPath#AUTO} resolved: native when the
   * library loads). Resolved on first use.
   *
   * @throws IllegalStateException for {@link SwapPath#NATIVE} when the library cannot be loaded
   */
  public synchronized SwapRewriter.Mechanism mechanism() {
    if (mechanism == null) {
      mechanism = swapPath.resolve(swapOverlap);
    }
    return mechanism;
  }

  /**
   * The cost model plans are compared with: the given one, with each tier's bandwidth measured
   * for the active path where the model's was left at the default: the host tier at {@link
   * NativeSwap#HOST_BANDWIDTH} on the native path (the default is the standard ops'), the disk
   * tier at {@link NativeSwap#DISK_BANDWIDTH} or {@link NativeSwap#STANDARD_DISK_BANDWIDTH}.
   */
  public CostModel costModel() {
    boolean standard = mechanism() == SwapRewriter.Mechanism.STANDARD;
    CostModel cm = costModel;
    if (!standard && cm.swapBandwidth() == CostModel.defaults().swapBandwidth()) {
      cm = cm.withSwapBandwidth(NativeSwap.HOST_BANDWIDTH);
    }
    if (cm.diskBandwidth() == CostModel.DEFAULT_DISK_BANDWIDTH) {
      cm = cm.withTier(Tier.DISK, standard ? NativeSwap.STANDARD_DISK_BANDWIDTH
          : NativeSwap.DISK_BANDWIDTH, cm.diskLatencyUs());
    }
    return cm;
  }

  /** The session config LMS needs (see {@link SessionConfigs#lms()}). */
  public ConfigProto sessionConfig() {
    return SessionConfigs.lms();
  }

  /**
   * Rewrites a graph. The given graph is not changed; the returned one must be closed.
   *
   * @throws PlanningException when no plan fits the budget
   */
  public Graph run(Graph graph) {
    LmsResult r = rewrite(graph.toGraphDef(), Map.of(), null);
    NativeSwap.ensureLoadedFor(r.graphDef());
    Graph out = new Graph();
    try {
      out.importGraphDef(r.graphDef());
    } catch (RuntimeException e) {
      out.close();
      throw e;
    }
    return out;
  }

  /**
   * Rewrites a training graph: feed shapes come from its manifest, the model holds what a step
   * runs (loss, train op, metrics), and disk-tier cleanup waits on its train op.
   */
  public LmsResult rewrite(TrainingGraph tg) {
    Manifest m = tg.manifest();
    return rewrite(tg.graphDef(), m.feedShapes(), m.trainOp(), m.runOps());
  }

  /**
   * Rewrites a GraphDef.
   *
   * @param gd         the graph
   * @param feedShapes static shapes of placeholders, by name (may be empty)
   * @param trainOp    the op run each step, or null (used to clean up disk-tier files)
   * @throws PlanningException when no plan fits the budget
   */
  public LmsResult rewrite(GraphDef gd, Map<String, long[]> feedShapes, String trainOp) {
    return rewrite(gd, feedShapes, trainOp, java.util.Set.of());
  }

  /**
   * Rewrites a GraphDef, considering only the ops a step runs: the ancestors of {@code runOps}
   * (tensor or op names of the fetches and targets; empty: every op).
   */
  public LmsResult rewrite(GraphDef gd, Map<String, long[]> feedShapes, String trainOp,
      java.util.Set<String> runOps) {
    long t0 = System.nanoTime();
    LOG.info("[LMS][0] Editing model for LMS");
    DataflowGraph model = GraphImporter.importGraph(gd, feedShapes, params.batchSize(),
        backwardScope, runOps);
    GraphStats stats = GraphStats.of(model);
    LOG.info("[LMS][0] The graph has {} vertices and {} edges.", stats.ops(), stats.edges());
    LOG.info("[LMS][0] The graph has {} MiB of learning parameters.",
        String.format("%.1f", stats.parameterBytes() / 1048576.0));
    LOG.info("[LMS][0] The largest operation is {} consuming {} MiB", stats.largestOp(),
        String.format("%.1f", stats.largestOpBytes() / 1048576.0));
    LOG.info("[LMS][0] Original categorized topological sort has {} levels.", stats.levels());
    long before = SwapAutoTuner.simulatePeak(model, SwapPlan.empty(params));
    if (SwapRewriter.isRewritten(gd) || model.isRewritten()) {
      LOG.info("[LMS][0] This model has already been updated with LMS swap operations. "
          + "LMS will not re-process it.");
      return new LmsResult(gd, SwapPlan.empty(params), model, stats, before, before, false,
          ms(t0), 0);
    }
    if (budgetBytes > 0) {
      long floor = LowerBound.of(model);
      if (floor > budgetBytes * memRatio) {
        long need = (long) Math.ceil(floor / memRatio);
        throw new PlanningException("A budget of " + mib(budgetBytes) + " MiB cannot work: "
            + "resident tensors (weights, constants, feeds) plus the largest op's working set "
            + "need " + mib(floor) + " MiB, so the smallest budget that could work is about "
            + mibUp(need) + " MiB (at memory ratio " + memRatio + ").", need);
      }
    }
    Scheduling.Result scheduled = scheduler == Scheduling.Scheduler.NONE
        ? new Scheduling.Result(model, java.util.List.of(), java.util.List.of(),
            dev.lms4j.core.schedule.Schedulers.Kind.LEVELS, before, before)
        : Scheduling.apply(model, scheduler);
    if (scheduled.changed()) {
      gd = ScheduleRewriter.rewrite(AddNRewriter.rewrite(gd, scheduled.chains()),
          scheduled.edges());
      model = scheduled.graph();
    }
    LmsResult r = plan(gd, model, stats, before, t0, trainOp);
    return scheduled.changed() ? r.withScheduling(scheduled) : r;
  }

  /** Plans and rewrites with the strategy, on the (scheduled) graph and its model. */
  private LmsResult plan(GraphDef gd, DataflowGraph model, GraphStats stats, long before,
      long t0, String trainOp) {
    if (strategy == Strategy.RECOMPUTE) {
      return recompute(gd, model, stats, before, t0);
    }
    if (strategy == Strategy.AUTO) {
      return auto(gd, model, stats, before, t0, trainOp);
    }
    if (strategy == Strategy.SWAP_ONLY) {
      return hybrid(gd, model, stats, before, t0, trainOp, false);
    }
    if (strategy == Strategy.SQRT) {
      RecomputePlan plan = SqrtCheckpointPlanner.plan(model);
      GraphDef out = RecomputeRewriter.rewrite(gd, plan);
      long after = RecomputePlanner.peak(model, plan);
      LOG.info("[LMS][0] sqrt(n) checkpointing: recomputing {} operations in {} groups; "
          + "predicted peak {} MiB -> {} MiB", plan.clonedOps(), plan.groups().size(),
          mib(before), mib(after));
      return new LmsResult(out, SwapPlan.empty(params), model, stats, before, after,
          !plan.isEmpty(), ms(t0), out.getNodeCount() - gd.getNodeCount(), plan);
    }
    SwapAutoTuner.Result tuned = SwapAutoTuner.tune(model, params, budgetBytes, memRatio);
    SwapPlan plan = tuned.plan();
    if (!tuned.lmsNeeded()) {
      return new LmsResult(gd, plan, model, stats, before, before, false, ms(t0), 0);
    }
    SwapParams p = plan.params();
    LOG.info("[LMS][0] LMS will use the following parameter set:");
    LOG.info("[LMS][0]   sync_mode: {}", p.syncMode());
    LOG.info("[LMS][0]   swapout_threshold: {}", p.swapoutThreshold());
    LOG.info("[LMS][0]   swapin_ahead: {}{}", p.swapinAhead(),
        p.syncMode() >= 2 ? " (ignored since sync_mode is " + p.syncMode() + ")" : "");
    LOG.info("[LMS][0]   swapin_groupby: {}{}", p.swapinGroupby(),
        p.syncMode() >= 2 ? " (ignored since sync_mode is " + p.syncMode() + ")" : "");
    GraphDef out = SwapRewriter.rewrite(gd, plan, params.tier(), swapDir, trainOp, mechanism());
    LOG.info("[LMS][0] Swap mechanism: {}", mechanism());
    int added = out.getNodeCount() - gd.getNodeCount();
    LOG.info("[LMS][0] Added {} operations to the model ({} swap-out operations ({} GiB) and {} "
        + "swap-in operations ({} GiB))", added, plan.swapOuts().size(),
        String.format("%.3f", plan.swapOutBytes() / 1073741824.0), plan.swapInCount(),
        String.format("%.3f", plan.swapInBytes() / 1073741824.0));
    long planningMs = ms(t0);
    LOG.info("[LMS][0] Editing model for LMS, took: {} ms (predicted peak {} MiB -> {} MiB)",
        planningMs, mib(before), mib(tuned.predictedPeak()));
    return new LmsResult(out, plan, model, stats, before, tuned.predictedPeak(), true,
        planningMs, added);
  }

  private LmsResult recompute(GraphDef gd, DataflowGraph model, GraphStats stats, long before,
      long t0) {
    java.util.Set<String> hints = new java.util.TreeSet<>(RecomputeRewriter.hintedOps(gd));
    hints.removeIf(h -> model.op(h).isEmpty());
    hints.addAll(namedRecomputeOps(gd, model));
    RecomputePlan plan;
    long after;
    if (!hints.isEmpty()) {
      plan = RecomputePlanner.manual(model, hints);
      after = RecomputePlanner.peak(model, plan);
    } else if (rematMode != RematMode.GROUPS) {
      return rematerialize(gd, model, stats, before, t0);
    } else if (budgetBytes > 0) {
      RecomputePlanner.Result r = RecomputePlanner.underBudget(model, budgetBytes, memRatio);
      if (!r.needed()) {
        return new LmsResult(gd, SwapPlan.empty(params), model, stats, before, before, false,
            ms(t0), 0);
      }
      plan = r.plan();
      after = r.predictedPeak();
    } else {
      plan = RecomputePlanner.heuristic(model);
      after = RecomputePlanner.peak(model, plan);
    }
    GraphDef out = RecomputeRewriter.rewrite(gd, plan);
    LOG.info("[LMS][0] Recomputing {} operations in {} groups ({} MiB no longer kept); "
        + "predicted peak {} MiB -> {} MiB", plan.clonedOps(), plan.groups().size(),
        mib(plan.bytes()), mib(before),
        mib(after));
    return new LmsResult(out, SwapPlan.empty(params), model, stats, before, after,
        !plan.isEmpty(), ms(t0), out.getNodeCount() - gd.getNodeCount(), plan);
  }

  /**
   * The ops named with {@link Builder#recompute} that a step runs; a name that is no op of the
   * graph is an error, one the step does not run is skipped with a warning.
   */
  private java.util.Set<String> namedRecomputeOps(GraphDef gd, DataflowGraph model) {
    java.util.Set<String> inGraph = new java.util.HashSet<>();
    for (org.tensorflow.proto.NodeDef n : gd.getNodeList()) {
      inGraph.add(n.getName());
    }
    java.util.Set<String> out = new java.util.TreeSet<>();
    for (String name : recomputeOps) {
      if (!inGraph.contains(name)) {
        throw new IllegalArgumentException("no op named '" + name + "' to recompute in the graph");
      }
      if (model.op(name).isEmpty()) {
        LOG.warn("[LMS][0] {} is not run by a training step; it is not recomputed", name);
      } else {
        out.add(name);
      }
    }
    return out;
  }

  private LmsResult rematerialize(GraphDef gd, DataflowGraph model, GraphStats stats,
      long before, long t0) {
    long limit = (long) (budgetBytes * memRatio);
    Rematerializer.Options o = Rematerializer.Options.defaults()
        .withMode(rematMode == RematMode.PATH ? Rematerializer.Mode.PATH
            : Rematerializer.Mode.STANDARD)
        .withSmallNodeLimit(smallNodeLimitBytes).withCostModel(costModel());
    Rematerializer.Result r = Rematerializer.bestEffort(model, limit, o);
    if (rematDump != null) {
      r.dump(rematDump);
    }
    if (!r.fits()) {
      long need = (long) Math.ceil(r.peakAfter() / memRatio);
      throw new PlanningException("Rematerialization (" + rematMode.name().toLowerCase(
          java.util.Locale.ROOT) + ") cannot fit a budget of " + mib(budgetBytes)
          + " MiB: the smallest simulated peak was " + mibUp(r.peakAfter()) + " MiB. The "
          + "smallest budget that could work with it is about " + mibUp(need) + " MiB.", need);
    }
    if (!r.needed()) {
      LOG.info("[LMS][0] Rematerialization is not necessary (simulated peak {} MiB).",
          mib(r.peakBefore()));
      return new LmsResult(gd, SwapPlan.empty(params), model, stats, before, r.peakBefore(),
          false, ms(t0), 0);
    }
    RecomputePlan plan = r.plan();
    GraphDef out = RecomputeRewriter.rewrite(gd, plan);
    LOG.info("[LMS][0] Rematerializing ({}) {} operations in {} groups; predicted peak {} MiB "
        + "-> {} MiB", rematMode.name().toLowerCase(java.util.Locale.ROOT), plan.clonedOps(),
        plan.groups().size(), mib(before), mib(r.peakAfter()));
    return new LmsResult(out, SwapPlan.empty(params), model, stats, before, r.peakAfter(), true,
        ms(t0), out.getNodeCount() - gd.getNodeCount(), plan);
  }

  private LmsResult auto(GraphDef gd, DataflowGraph model, GraphStats stats, long before,
      long t0, String trainOp) {
    long available = (long) (budgetBytes * memRatio);
    if (before <= available) {
      LOG.info("[LMS][0] LMS is not necessary. Turned LMS off. (simulated peak {} MiB)",
          mib(before));
      return new LmsResult(gd, SwapPlan.empty(params), model, stats, before, before, false,
          ms(t0), 0);
    }
    // candidates, each planned for the same budget; the cost model picks the fastest. (XLA-style
    // remat alone is not one: on GPT-2 its plans moved a loss by one ulp, README known issues.)
    Map<String, LmsResult> plans = new LinkedHashMap<>();
    PlanningException failure = null;
    for (String name : List.of("hybrid", "baseline")) {
      try {
        plans.put(name, name.equals("hybrid")
            ? hybrid(gd, model, stats, before, t0, trainOp, true)
            : baseline(gd, model, stats, before, t0, trainOp));
      } catch (PlanningException e) {
        LOG.info("[LMS][0] auto: the {} planner found no plan ({})", name, e.getMessage());
        if (failure == null || e.smallestBudgetBytes() < failure.smallestBudgetBytes()) {
          failure = e;
        }
      }
    }
    if (plans.isEmpty()) {
      throw failure;
    }
    String best = null;
    double bestMs = Double.MAX_VALUE;
    StringBuilder why = new StringBuilder();
    for (Map.Entry<String, LmsResult> e : plans.entrySet()) {
      double ms = PlanCosts.stepMs(costModel(), model, e.getValue().plan(), e.getValue().recompute());
      why.append(why.length() == 0 ? "" : ", ").append(e.getKey()).append(' ')
          .append(String.format("%.1f", ms)).append(" ms");
      if (ms < bestMs) {
        bestMs = ms;
        best = e.getKey();
      }
    }
    LOG.info("[LMS][0] auto: predicted step time {}: {} plan chosen", why, best);
    LmsResult chosen = plans.get(best);
    return chosen.withPlanningMs(ms(t0));
  }

  /** The hybrid planner's plan (with or without recomputation), rewritten. */
  private LmsResult hybrid(GraphDef gd, DataflowGraph model, GraphStats stats, long before,
      long t0, String trainOp, boolean recompute) {
    HybridPlanner.Options o = new HybridPlanner.Options(budgetBytes, memRatio, costModel(),
        params.tier(), true, recompute, 12, 400);
    HybridPlanner.Result r = HybridPlanner.plan(model, o);
    if (!r.needed()) {
      LOG.info("[LMS][0] LMS is not necessary. Turned LMS off. (simulated peak {} MiB)",
          mib(before));
      return new LmsResult(gd, SwapPlan.empty(params), model, stats, before, before, false,
          ms(t0), 0);
    }
    GraphDef remat = RecomputeRewriter.rewrite(gd, r.recompute());
    GraphDef out = SwapRewriter.rewrite(remat, r.swaps(), params.tier(), swapDir, trainOp,
        mechanism());
    LOG.info("[LMS][0] {}: recomputing {} operations in {} groups and swapping {} tensors ({} "
        + "MiB); predicted peak {} MiB -> {} MiB, step {} ms -> {} ms",
        recompute ? "Hybrid planner" : "Swap-only planner", r.recompute().clonedOps(),
        r.recompute().groups().size(), r.swaps().swapOuts().size(),
        mib(r.swaps().swapOutBytes()), mib(before), mib(r.predictedPeak()),
        String.format("%.1f", r.baseStepMs()), String.format("%.1f", r.predictedStepMs()));
    return new LmsResult(out, r.swaps(), model, stats, before, r.predictedPeak(), true, ms(t0),
        out.getNodeCount() - gd.getNodeCount(), r.recompute())
        .withPlanner(recompute ? "hybrid" : "hybrid-swap");
  }

  /**
   * The baseline: recompute cheap groups first, swap what still does not fit with the
   * auto-tuned TFLMS planner, or swap alone when the cost model predicts that faster.
   */
  private LmsResult baseline(GraphDef gd, DataflowGraph model, GraphStats stats, long before,
      long t0, String trainOp) {
    long available = (long) (budgetBytes * memRatio);
    RecomputePlanner.Result rr = RecomputePlanner.bestEffort(model, budgetBytes, memRatio);
    GraphDef remat = RecomputeRewriter.rewrite(gd, rr.plan());
    if (rr.predictedPeak() <= available) {
      LOG.info("[LMS][0] Recomputation alone fits: {} operations in {} groups; predicted peak "
          + "{} MiB -> {} MiB", rr.plan().clonedOps(), rr.plan().groups().size(), mib(before),
          mib(rr.predictedPeak()));
      return new LmsResult(remat, SwapPlan.empty(params), model, stats, before,
          rr.predictedPeak(), true, ms(t0), remat.getNodeCount() - gd.getNodeCount(),
          rr.plan()).withPlanner("grappler-recompute");
    }
    DataflowGraph model2 = RecomputeApplier.apply(model, rr.plan());
    SwapAutoTuner.Result tuned;
    RecomputePlan recompute = rr.plan();
    try {
      tuned = SwapAutoTuner.tune(model2, params, budgetBytes, memRatio);
      // swapping alone may fit too: keep whichever the cost model predicts faster
      try {
        SwapAutoTuner.Result swapOnly = SwapAutoTuner.tune(model, params, budgetBytes, memRatio);
        CostModel cm = costModel();
        double both = PlanCosts.stepMs(cm, model, tuned.plan(), recompute);
        double alone = PlanCosts.stepMs(cm, model, swapOnly.plan(), RecomputePlan.empty());
        LOG.info("[LMS][0] Predicted step time: recompute + swap {} ms, swap alone {} ms",
            String.format("%.1f", both), String.format("%.1f", alone));
        if (alone < both) {
          tuned = swapOnly;
          recompute = RecomputePlan.empty();
          remat = gd;
        }
      } catch (PlanningException e) {
        LOG.debug("swap alone does not fit: {}", e.getMessage());
      }
    } catch (PlanningException e) {
      // the recomputed groups keep their inputs alive until the backward pass; at the tightest
      // budgets swapping alone can go lower
      LOG.info("[LMS][0] Recompute + swap does not fit ({}); trying swap alone", e.getMessage());
      recompute = RecomputePlan.empty();
      remat = gd;
      tuned = SwapAutoTuner.tune(model, params, budgetBytes, memRatio);
    }
    GraphDef out = SwapRewriter.rewrite(remat, tuned.plan(), params.tier(), swapDir, trainOp,
        tuned.plan().isEmpty() ? SwapRewriter.Mechanism.STANDARD : mechanism());
    LOG.info("[LMS][0] Recomputing {} operations in {} groups and swapping {} tensors ({} MiB); "
        + "predicted peak {} MiB -> {} MiB", recompute.clonedOps(), recompute.groups().size(),
        tuned.plan().swapOuts().size(), mib(tuned.plan().swapOutBytes()), mib(before),
        mib(tuned.predictedPeak()));
    return new LmsResult(out, tuned.plan(), model, stats, before, tuned.predictedPeak(), true,
        ms(t0), out.getNodeCount() - gd.getNodeCount(), recompute)
        .withPlanner(recompute.isEmpty() ? "tflms-swap" : "recompute+tflms-swap");
  }

  private static long ms(long t0) {
    return (System.nanoTime() - t0) / 1_000_000;
  }

  private static long mib(long b) {
    return b >> 20;
  }

  private static long mibUp(long b) {
    return (b + (1 << 20) - 1) >> 20;
  }

  /** Builder for {@link Lms}. */
  public static final class Builder {
    private long budgetBytes;
    private SwapParams params = SwapParams.defaults();
    private double memRatio = SwapAutoTuner.DEFAULT_MEM_RATIO;
    private String backwardScope = GraphImporter.DEFAULT_BACKWARD_SCOPE;
    private Path swapDir;
    private Strategy strategy = Strategy.SWAP;
    private CostModel costModel = CostModel.defaults();
    private RematMode rematMode = RematMode.GROUPS;
    private long smallNodeLimitBytes;
    private Scheduling.Scheduler scheduler = Scheduling.Scheduler.NONE;
    private Path rematDump;
    private SwapPath swapPath = SwapPath.AUTO;
    private boolean swapOverlap;
    private java.util.Set<String> recomputeOps = java.util.Set.of();

    private Builder() {}

    /**
     * Manual recomputation, the Java counterpart of the {@code _recompute_hint} attribute: these
     * forward ops (by name) are recomputed in the backward pass, in connected groups, together
     * with the ops marked by the attribute; the budget does not change the choice. Needs
     * {@link Strategy#RECOMPUTE}. Random, stateful, fed, variable and constant ops cannot be
     * named ({@link #build} succeeds, {@link Lms#rewrite} throws IllegalArgumentException).
     *
     * <pre>{@code
     * Lms.builder().strategy(Lms.Strategy.RECOMPUTE).recompute(Set.of("relu1", "bias1")).build();
     * }</pre>
     */
    public Builder recompute(java.util.Collection<String> opNames) {
      this.recomputeOps = java.util.Set.copyOf(opNames);
      return this;
    }

    /**
     * How {@link Strategy#RECOMPUTE} chooses ops: grappler-style groups (default) or XLA-style
     * rematerialization under the budget times the memory ratio ({@link Rematerializer}).
     */
    public Builder rematMode(RematMode m) {
      this.rematMode = Objects.requireNonNull(m);
      return this;
    }

    /** Tensors smaller than this are never rematerialized (standard and path modes). */
    public Builder smallNodeLimitBytes(long bytes) {
      if (bytes < 0) {
        throw new IllegalArgumentException("small node limit must be >= 0");
      }
      this.smallNodeLimitBytes = bytes;
      return this;
    }

    /**
     * How swapped tensors move (default {@link SwapPath#AUTO}: the native swap ops when their
     * library loads in this JVM, else standard ops).
     */
    public Builder swapPath(SwapPath p) {
      this.swapPath = Objects.requireNonNull(p);
      return this;
    }

    /**
     * The scheduling step run before planning, for every strategy: AddN chains and the
     * scheduler's order enforced by control edges ({@link Scheduling}); default none.
     */
    public Builder scheduler(Scheduling.Scheduler s) {
      this.scheduler = Objects.requireNonNull(s);
      return this;
    }

    /** Writes the rematerializer's per-op memory and decisions here (.json or TSV). */
    public Builder rematDump(Path file) {
      this.rematDump = file;
      return this;
    }

    /**
     * Native path only: swap-outs leave their copy to the library's copy thread so it overlaps
     * with compute (ops still run in the planned order; a swap-in waits for its copy). Default
     * off.
     */
    public Builder swapOverlap(boolean on) {
      this.swapOverlap = on;
      return this;
    }

    /** The cost model the auto strategy compares plans with (default: {@link CostModel#defaults()}). */
    public Builder costModel(CostModel cm) {
      this.costModel = Objects.requireNonNull(cm);
      return this;
    }

    /** Swap (default) or recompute. */
    public Builder strategy(Strategy s) {
      this.strategy = Objects.requireNonNull(s);
      return this;
    }

    /** The device memory budget in bytes (needed for auto-tuning). */
    public Builder budget(long bytes) {
      if (bytes <= 0) {
        throw new IllegalArgumentException("budget must be positive");
      }
      this.budgetBytes = bytes;
      return this;
    }

    /** TFLMS parameters (default: auto-tune everything, host tier). */
    public Builder params(SwapParams p) {
      this.params = Objects.requireNonNull(p);
      return this;
    }

    /**
     * The share of the budget the simulated peak may use (TFLMS's
     * {@code TF_LMS_SIMULATOR_MEM_RATIO}; lms4j default 0.8): the rest is margin for fragmentation and
     * kernel scratch memory.
     */
    public Builder memRatio(double r) {
      if (!(r > 0 && r <= 1)) {
        throw new IllegalArgumentException("memory ratio must be in (0, 1]");
      }
      this.memRatio = r;
      return this;
    }

    /** Name scope of gradient ops (default {@code gradients}). */
    public Builder backwardScope(String scope) {
      this.backwardScope = Objects.requireNonNull(scope);
      return this;
    }

    /** Directory for the disk tier's swap files. */
    public Builder swapDir(Path dir) {
      this.swapDir = dir;
      return this;
    }

    /** The configured instance. */
    public Lms build() {
      return new Lms(this);
    }
  }
}
