package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.ResidentLayouts;
import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.PlanningContext;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TensorPolicy;
import dev.lms4j.core.schedule.AddNChains;
import dev.lms4j.core.schedule.Scheduling;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;

/**
 * Large Model Support for a TensorFlow Java graph: rewrites it so its peak memory fits a budget,
 * by swapping tensors out and back in, recomputing cheap ones, or both, as the {@link LmsMode}
 * chooses. Use it before the session starts:
 *
 * <pre>{@code
 * Lms lms = Lms.builder().budget(512L << 20).build();          // mode auto
 * try (Graph rewritten = lms.run(graph);
 *      Session s = new Session(rewritten, lms.sessionConfig())) {
 *   ...
 * }
 * }</pre>
 *
 * The steps: import the GraphDef into lms4j's model, the rewrites before planning (on by
 * default, each with an opt-out in {@link LmsBuilder}: large gradient sums become running
 * accumulations, {@link GradientSums}; the framework optimizers' all-gradients-to-all-updates
 * control edges are relaxed, {@link OptimizerEdges}; large initializer Fills are kept from
 * constant folding, {@link InitConstants}; all keep losses bit-identical), check the
 * floor (resident tensors plus the largest op) on the graph they give, an optional scheduling
 * step, the mode's planner ({@link LmsMode#plan}), and one
 * rewrite that commits the {@link MemoryPlan} ({@link PlanCommit}). TensorFlow Java cannot
 * re-point the inputs of ops already in a {@link Graph}, so {@link #run(Graph)} returns a new
 * graph (which the caller must close) and leaves the original as it was. The mode defaults to
 * {@code auto} when a budget (or TFLMS parameters) is set, as on the command line, and to
 * {@code off} otherwise. When the graph fits as it is, nothing is changed ("LMS is not
 * necessary").
 */
public final class Lms {
  private static final Logger LOG = LoggerFactory.getLogger(Lms.class);
  /**
   * Environment variable naming a file the allocator model's requests for a step of the graph
   * handed back are written to ({@link #writeReplay}), where a budget is set.
   */
  public static final String REPLAY_LOG_ENV = "LMS4J_REPLAY_LOG";

  private final Budget budget;
  private final SwapParams params;
  private final String backwardScope;
  private final SortedSet<String> recomputeOps;
  private final Path swapDir;
  private final LmsMode mode;
  private final CostModel costModel;
  private final long smallNodeLimitBytes;
  private final Scheduling.Scheduler scheduler;
  private final Path rematDump;
  private final SwapPath swapPath;
  private final boolean swapOverlap;
  private final Path dumpDot;
  private final GradientSums.Options gradientSums;
  private final boolean optimizerEdges;
  private final boolean initConstants;
  private final boolean sparseUpdates;
  private final boolean slotOffload;
  private final boolean offloadNow;
  private final boolean weightOffload;
  private final boolean weightsNow;
  private final boolean allocatorCheck;
  private final boolean serialOrder;
  private final Map<String, Long> scratch;
  private SwapRewriter.Mechanism mechanism;
  private final LmsBuilder source;

  Lms(LmsBuilder b) {
    this.source = b.copy();
    this.budget = new Budget(b.budgetBytes, b.memRatio());
    this.params = b.params;
    this.backwardScope = b.backwardScope;
    this.recomputeOps = java.util.Collections.unmodifiableSortedSet(new TreeSet<>(b.recomputeOps));
    this.swapDir = b.swapDir;
    this.swapPath = b.swapPath;
    this.swapOverlap = b.swapOverlap;
    this.costModel = b.costModel;
    this.smallNodeLimitBytes = b.smallNodeLimitBytes;
    this.scheduler = b.scheduler;
    this.rematDump = b.rematDump;
    this.dumpDot = b.dumpDot;
    this.gradientSums = b.gradientSums;
    this.optimizerEdges = b.optimizerEdges;
    this.initConstants = b.initConstants;
    this.sparseUpdates = b.sparseUpdates;
    this.slotOffload = b.slotOffload;
    this.offloadNow = b.offloadNow;
    this.weightOffload = b.weightOffload;
    this.weightsNow = b.weightsNow;
    this.allocatorCheck = b.allocatorCheck;
    this.serialOrder = b.serialOrder;
    this.scratch = b.scratch;
    LmsMode m = b.mode != null ? b.mode
        : budget.isSet() || !params.autoTune() ? LmsMode.AUTO : LmsMode.OFF;
    this.mode = m.with(params);
    if (params.tier() == Tier.DISK && swapDir == null) {
      throw new IllegalArgumentException("the disk tier needs a swap directory (swapDir)");
    }
    if (mode.needsBudget() && !budget.isSet()) {
      throw new IllegalArgumentException("the " + mode.cliName() + " mode needs a budget");
    }
    if (mode == LmsMode.TFLMS && params.autoTune() && !budget.isSet()) {
      throw new IllegalArgumentException("auto-tuning needs a budget: set budget(bytes) or the "
          + "parameters swapout_threshold, swapin_ahead and swapin_groupby");
    }
  }

  /**
   * The next offload this configuration can plan with: the slots on the host
   * (where they qualify), else the weights too ({@link LmsBuilder#weightOffload}); null
   * where there is none left (offload off, the mode does not plan, nothing more qualifies).
   * A probe whose plans ran out of memory tries them as alternatives.
   */
  public Lms withNextOffload(TrainingGraph tg) {
    return offloading(tg.graphDef(), targets(tg.manifest().runOps(), tg.manifest().trainOp()));
  }

  /**
   * This configuration planning with the next offload: the slots on the host where they are
   * not yet and one qualifies, else the weights too where they are not yet and one qualifies;
   * null where offload is off, the mode does not plan, or nothing more qualifies.
   */
  private Lms offloading(GraphDef gd, Set<String> targets) {
    if (!mode.plans()) {
      return null;
    }
    LmsBuilder b = source.copy();
    if (slotOffload && !offloadNow && !weightsNow
        && SlotOffload.qualifies(gd, targets, SlotOffload.DEFAULT_MIN_BYTES)) {
      b.offloadNow = true;
      return b.build();
    }
    if (slotOffload && weightOffload && !weightsNow
        && SlotOffload.weightsQualify(gd, targets, SlotOffload.DEFAULT_MIN_BYTES)) {
      // the slots go with the weights
      b.offloadNow = true;
      b.weightsNow = true;
      return b.build();
    }
    return null;
  }

  /** A builder: no budget, TFLMS's default parameters (auto-tuned), host tier. */
  public static LmsBuilder builder() {
    return new LmsBuilder();
  }

  /**
   * The same configuration planning for another budget or memory ratio (the share of the budget
   * a plan's simulated peak may use): how a probe that measured more than the plan predicted
   * re-plans ({@code dev.lms4j.tf.run.Probe}).
   *
   * @param b the budget and memory ratio to plan for
   * @return a new instance; this one is unchanged
   */
  public Lms withBudget(Budget b) {
    LmsBuilder c = source.copy().memRatio(b.memRatio());
    if (b.isSet()) {
      c.budget(b.bytes());
    }
    return c.build();
  }

  /**
   * The same configuration planning with measured kernel scratch (see
   * {@link LmsBuilder#scratch}): how a probe whose plan ran out of memory re-plans with the
   * scratch a traced step measured ({@code dev.lms4j.tf.run.Probe}).
   *
   * @param byOpName scratch bytes by op name
   * @return a new instance; this one is unchanged
   */
  public Lms withScratch(Map<String, Long> byOpName) {
    return source.copy().scratch(byOpName).build();
  }

  /**
   * The same configuration in another mode: how a probe tries the other planners' plans when
   * this mode's plan ran out of memory ({@code dev.lms4j.tf.run.Probe}).
   *
   * @param m the mode
   * @return a new instance; this one is unchanged
   */
  public Lms withMode(LmsMode m) {
    return source.copy().mode(m).build();
  }

  /**
   * The modes whose plans a probe tries, at the same budget, when this mode's plan runs out of
   * memory, and whose plans the allocator check replays where none of this mode's passes:
   * {@code auto} must reach what each user-facing planner reaches ({@code tflms},
   * {@code swap}, {@code remat}), and {@code swap} what {@code tflms} reaches; none for the
   * other modes, whose plans the user chose.
   */
  public List<LmsMode> alternatives() {
    return switch (mode) {
      case AUTO -> List.of(LmsMode.TFLMS, LmsMode.SWAP, LmsMode.REMAT);
      case SWAP -> List.of(LmsMode.TFLMS);
      default -> List.of();
    };
  }

  /** The mode this instance plans in (the default resolved). */
  public LmsMode mode() {
    return mode;
  }

  /** The budget and memory ratio. */
  public Budget budget() {
    return budget;
  }

  /**
   * Whether the memory ratio was set ({@link LmsBuilder#memRatio(double)}); else
   * {@link #budget()} holds the default, and a probe starts at its own default instead.
   */
  public boolean memRatioSet() {
    return source.memRatioSet();
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

  /** The cost model plans are compared with ({@link NativeSwap#costModel}). */
  public CostModel costModel() {
    return NativeSwap.costModel(costModel, mechanism());
  }

  /** Whether rewritten graphs run in a fixed order ({@link LmsBuilder#serialOrder(boolean)}). */
  public boolean serialOrder() {
    return serialOrder;
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
   * runs (loss, train op, metrics), and disk-tier cleanup waits on its train op. With
   * {@link LmsBuilder#serialOrder(boolean)}, a rewritten graph runs its step in the simulated
   * order and its init op's ops in graph order ({@link SerialOrder}), so that it needs the same
   * memory in every run.
   */
  public LmsResult rewrite(TrainingGraph tg) {
    Manifest m = tg.manifest();
    LmsResult r = rewrite(tg.graphDef(), m.feedShapes(), m.trainOp(), m.runOps(), m.init(),
        serialOrder);
    if (serialOrder && r.rewritten()) {
      SerialOrder.Result s = SerialOrder.enforce(r.graphDef(), m, r.memoryPlan().needed()
          ? stepOrder(r.memoryPlan().applyTo(r.model())) : null);
      if (s.addedEdges() > 0) {
        r = r.withGraphDef(s.graphDef());
      }
    }
    return r;
  }

  /** The names of {@code g}'s ops in the order the allocator check replayed it in. */
  private static List<String> stepOrder(DataflowGraph g) {
    List<String> out = new ArrayList<>(g.size());
    for (int v : Levels.of(g).schedule()) {
      out.add(g.op(v).name());
    }
    return out;
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
    return rewrite(gd, feedShapes, trainOp, Set.of());
  }

  /**
   * Rewrites a GraphDef, considering only the ops a step runs: the ancestors of {@code runOps}
   * (tensor or op names of the fetches and targets; empty: every op).
   */
  public LmsResult rewrite(GraphDef gd, Map<String, long[]> feedShapes, String trainOp,
      Set<String> runOps) {
    return rewrite(gd, feedShapes, trainOp, runOps, null, false);
  }

  /**
   * As above; {@code initOp} (null: not known) is the op that initializes the variables: where
   * the allocator model finds that creating the largest variables last lets a step fit, the
   * init op is made to ({@link InitOrder}).
   */
  private LmsResult rewrite(GraphDef gd, Map<String, long[]> feedShapes, String trainOp,
      Set<String> runOps, String initOp, boolean ordered) {
    return planned(gd, feedShapes, trainOp, runOps, initOp, ordered).result();
  }

  /**
   * A rewrite, and what the allocator check said of it.
   *
   * @param result   the rewrite
   * @param overNeed the allocator model's need where the check did not accept the result: it
   *                 kept the closest plan with a warning, or the graph is left as given (fitting
   *                 the replay without the headroom), bytes; 0 where the check accepted the
   *                 plan, or did not run (no budget, the check off, a mode that does not plan)
   */
  private record Planned(LmsResult result, long overNeed) {
    /** True when the allocator check did not accept this rewrite. */
    boolean over() {
      return overNeed > 0;
    }

    /** True when this rewrite is to be taken over {@code other}. */
    boolean beats(Planned other) {
      return other == null || !over() || (other.over() && overNeed < other.overNeed);
    }
  }

  /**
   * Plans at this configuration's memory ratio; where planning is refused, plans again at
   * {@link LmsBuilder#ORDERED_MEM_RATIO} ({@link #raised}), then with the slots and then the
   * weights on the host ({@link #offloading}): of those, the first the allocator check accepts,
   * else the one it found closest (the lowest need; one at the raised ratio only within the
   * check's headroom above the budget). A plan made at this ratio that the check
   * did not accept is returned as it is (the check planned again at lower ratios already).
   */
  private Planned planned(GraphDef gd, Map<String, long[]> feedShapes, String trainOp,
      Set<String> runOps, String initOp, boolean ordered) {
    PlanningException refused;
    try {
      return rewritePlanned(gd, feedShapes, trainOp, runOps, initOp, ordered);
    } catch (PlanningException e) {
      refused = e;
    }
    Planned kept = null;
    Lms raised = raised();
    if (raised != null) {
      LOG.info("[LMS][0] No plan keeps the margin of memory ratio {} ({}); planning again at "
          + "{}, the allocator check judging the plans", budget.memRatio(), refused.getMessage(),
          raised.budget.memRatio());
      try {
        Planned p = raised.rewritePlanned(gd, feedShapes, trainOp, runOps, initOp, ordered);
        if (!p.over()) {
          return p;
        }
        // a plan the check did not accept, but the closest it found, where the replay puts it
        // within the check's headroom above the budget (there its verdict is not trusted either
        // way); the graph as given is not one (it needs more than the planners' margin, and
        // where it fit the budget the refusal above returned it or named the allocator's need)
        if (p.result().memoryPlan().needed() && p.overNeed() <= budget.bytes()
            + (long) (AllocatorCheck.HEADROOM * budget.bytes())) {
          kept = p;
        } else {
          LOG.info("[LMS][0] The closest plan at memory ratio {} needs about {} MiB of the "
              + "allocator, more than the budget and its {}% headroom: not kept",
              raised.budget.memRatio(), Budget.mibUp(p.overNeed()),
              Math.round(AllocatorCheck.HEADROOM * 100));
        }
      } catch (PlanningException e) {
        LOG.info("[LMS][0] No plan at memory ratio {} either ({})", raised.budget.memRatio(),
            e.getMessage());
      }
    }
    Lms offloaded = offloading(gd, targets(runOps, trainOp));
    if (offloaded == null) {
      if (kept != null) {
        return kept;
      }
      throw refused;
    }
    // the last levers: the optimizer's slots, then the weights, leave the device between
    // their uses
    if (offloaded.weightsNow) {
      LOG.info("[LMS][0] No plan fits with the weights on the device ({}); planning again "
          + "with them kept on the host, parsed just before each op that reads them",
          refused.getMessage());
    } else {
      LOG.info("[LMS][0] No plan fits with the optimizer's slots on the device ({}); "
          + "planning again with them kept on the host between their updates",
          refused.getMessage());
    }
    try {
      Planned p = offloaded.planned(gd, feedShapes, trainOp, runOps, initOp, ordered);
      if (p.beats(kept)) {
        return p;
      }
      LmsResult.PreRewrites host = p.result().preRewrites();
      LOG.info("[LMS][0] The plan at memory ratio {} needs no more of the allocator ({} MiB) "
          + "than the one {} ({} MiB): it is kept", raised.budget.memRatio(),
          Budget.mibUp(kept.overNeed()), host.offloadedWeights() > 0
              ? "with the weights on the host" : host.offloadedSlots() > 0
              ? "with the optimizer's slots on the host" : "planned with the host's help",
          Budget.mibUp(p.overNeed()));
      return kept;
    } catch (PlanningException again) {
      if (kept != null) {
        return kept;
      }
      throw again.smallestBudgetBytes() > 0 && (refused.smallestBudgetBytes() <= 0
          || again.smallestBudgetBytes() < refused.smallestBudgetBytes()) ? again : refused;
    }
  }

  /**
   * This configuration at {@link LmsBuilder#ORDERED_MEM_RATIO}, where its ratio is the default
   * one of a plan nothing probes and the allocator check judges its plans; else null. The
   * default keeps a fifth of the budget free against what the live bytes miss; the allocator
   * check replays the plan through the BFC allocator model and keeps 5% of the budget free of
   * its chunks, so where no plan keeps the larger margin, the check, not the margin, decides:
   * measured on the corpus DenseNet at 27 MiB, at ratio 0.8 no plan kept the slots and weights on
   * the device, and the plans with the weights on the host needed 30 MiB of the replay (and ran
   * out of memory), while tflms's closest plan after planning at 0.95 needs about 28 and trains
   * (measured peak 26.6 MiB).
   */
  private Lms raised() {
    if (source.memRatioSet() || !allocatorCheck || !budget.isSet() || !mode.plans()
        || !budgetShapesPlan() || budget.memRatio() >= LmsBuilder.ORDERED_MEM_RATIO) {
      return null;
    }
    return source.copy().memRatio(LmsBuilder.ORDERED_MEM_RATIO).build();
  }

  /** The ops a step runs: {@code runOps}, else the train op, else none. */
  private static Set<String> targets(Set<String> runOps, String trainOp) {
    return !runOps.isEmpty() ? runOps : trainOp != null ? Set.of(trainOp) : Set.of();
  }

  private Planned rewritePlanned(GraphDef gd, Map<String, long[]> feedShapes, String trainOp,
      Set<String> runOps, String initOp, boolean ordered) {
    long t0 = System.nanoTime();
    LOG.info("[LMS][0] Editing model for LMS");
    DataflowGraph model = importModel(gd, feedShapes, runOps);
    GraphStats stats = GraphStats.of(model).logged();
    long before = SwapAutoTuner.simulatePeak(model, SwapPlan.empty(params));
    if (SwapRewriter.isRewritten(gd) || model.isRewritten()) {
      LOG.info("[LMS][0] This model has already been updated with LMS swap operations. "
          + "LMS will not re-process it.");
      return new Planned(new LmsResult(gd, MemoryPlan.unchanged(mode.cliName(), model,
          PlanningContext.of(budget, TensorPolicy.builtin(model)), before), model, stats,
          before, ms(t0), 0, null), 0);
    }
    GraphDef given = gd;
    DataflowGraph givenModel = model;
    LmsResult.PreRewrites pre = LmsResult.PreRewrites.NONE;
    // what a fallback to the graph as given returns: the given graph with InitConstants applied
    GraphDef givenGd = gd;
    LmsResult.PreRewrites givenPre = LmsResult.PreRewrites.NONE;
    // only when the graph as given does not fit (a graph that fits is left as it is; the
    // simulated peak counts the constants init leaves held)
    if (mode.plans() && !(budget.isSet() && budget.fits(before))) {
      List<String> targets = new ArrayList<>(runOps);
      if (targets.isEmpty() && trainOp != null) {
        targets.add(trainOp);
      }
      int fills = 0;
      long fillBytes = 0;
      if (initConstants && !targets.isEmpty()) {
        InitConstants.Result r = InitConstants.rewrite(gd, targets);
        if (r.changed()) {
          gd = r.graphDef();
          fills = r.fills().size();
          fillBytes = r.bytes();
          // the model holds every op (no run ops), or the constants init leaves held
          // (InitHeldConstants), which this rewrite frees
          model = importModel(gd, feedShapes, runOps);
          LOG.info("[LMS][0] Before planning: {} initializer Fills ({} MiB) kept from constant "
              + "folding, so the init run's executor does not hold them as constants",
              fills, String.format("%.1f", fillBytes / 1048576.0));
          // it only frees memory (init and step alike), so a fallback to the graph as given
          // keeps it
          givenGd = gd;
          givenModel = model;
          givenPre = new LmsResult.PreRewrites(0, 0, 0,
              SwapAutoTuner.simulatePeak(model, SwapPlan.empty(params)), fills, fillBytes, 0, 0);
        }
      }
      int removed = 0;
      int addedEdges = 0;
      if (optimizerEdges && !targets.isEmpty()) {
        OptimizerEdges.Result r = OptimizerEdges.relax(gd, targets, backwardScope);
        if (r.changed()) {
          gd = r.graphDef();
          removed = r.removedEdges();
          addedEdges = r.addedEdges();
          model = importModel(gd, feedShapes, runOps);
        }
      } else if (optimizerEdges) {
        LOG.info("[LMS][0] Optimizer edges left as they are: the ops a step runs are not known");
      }
      int sparse = 0;
      long sparseBytes = 0;
      if (sparseUpdates) {
        SparseUpdates.Result r = SparseUpdates.rewrite(gd, feedShapes);
        if (r.changed()) {
          gd = r.graphDef();
          sparse = r.updates().size();
          sparseBytes = r.bytes();
          model = importModel(gd, feedShapes, runOps);
          LOG.info("[LMS][0] Before planning: {} dense gradient-descent updates of gathered "
              + "tables now update only the rows looked up (bit-identical; {} MiB of dense "
              + "gradients a step no longer computes): {}", sparse,
              String.format("%.1f", sparseBytes / 1048576.0), r.updates());
        }
      }
      int sums = 0;
      if (gradientSums != null) {
        List<AddNChains.Chain> chains = GradientSums.chains(model, gradientSums);
        if (!chains.isEmpty()) {
          gd = AddNRewriter.rewrite(gd, chains);
          sums = chains.size();
          model = importModel(gd, feedShapes, runOps);
        }
      }
      if (!runOps.isEmpty()) {
        // last: the products as grappler will group them, written in, so plans keep them (only
        // where every op a step fetches is known: a fetched op must keep its value)
        ProductGroups.Result r = ProductGroups.apply(gd, feedShapes, params.batchSize(),
            runOps);
        if (r.changed()) {
          gd = r.graphDef();
          model = importModel(gd, feedShapes, runOps);
          LOG.info("[LMS][0] Before planning: {} product trees grouped as grappler groups them "
              + "and {} products it merges read the one it keeps, written into the graph so "
              + "plans keep them (bit-identical)", r.groups(), r.merged());
        }
      }
      int slots = 0;
      long slotBytes = 0;
      int weights = 0;
      long weightBytes = 0;
      if (offloadNow) {
        // after the others: they read the graph as the user wrote it (GradientSums refuses a
        // graph holding lms4j's ops)
        SlotOffload.Result r = SlotOffload.rewrite(gd, Set.copyOf(targets),
            SlotOffload.DEFAULT_MIN_BYTES, weightsNow);
        if (r.changed()) {
          gd = r.graphDef();
          slots = r.slots().size();
          slotBytes = r.bytes();
          weights = r.weights().size();
          weightBytes = r.weightBytes();
          model = importModel(gd, feedShapes, runOps);
          LOG.info("[LMS][0] Before planning: {} optimizer slots ({} MiB) kept on the host "
              + "between their updates, {} weights ({} MiB) between their reads (bit-identical; "
              + "per step, two copies of a slot's bytes, a weight's per read and two)",
              slots, String.format("%.1f", slotBytes / 1048576.0), weights,
              String.format("%.1f", weightBytes / 1048576.0));
        }
      }
      if (gd != given) {
        pre = new LmsResult.PreRewrites(sums, removed, addedEdges,
            SwapAutoTuner.simulatePeak(model, SwapPlan.empty(params)), fills, fillBytes, sparse,
            sparseBytes, slots, slotBytes, weights, weightBytes);
        LOG.info("[LMS][0] Before planning: {} gradient sums turned into running accumulations, "
            + "{} optimizer control edges removed ({} added to keep variable reads before "
            + "updates); simulated peak {} -> {} MiB", sums, removed, addedEdges,
            before >> 20, pre.peakAfter() >> 20);
      }
    }
    // the simulated peak of what a fallback returns (less than before by the held constants)
    long givenPeak = givenPre.initConstants() > 0 ? givenPre.peakAfter() : before;
    PlanningContext ctx = context(gd, model);
    // the allocator's replays may create the largest variables last, as InitOrder makes init do
    boolean layouts = initOp != null && allocatorCheck && budget.isSet() && mode.plans();
    Scheduling.Result scheduled = null;
    MemoryPlan plan = null;
    boolean asGiven = false;
    // the allocator's need where its check kept a plan it did not accept
    long overNeed = 0;
    try {
      if (mode.plans()) {
        budget.requireFloor(LowerBound.of(model));
      }
      if (scheduler != Scheduling.Scheduler.NONE) {
        scheduled = Scheduling.apply(model, scheduler);
        if (scheduled.changed()) {
          gd = ScheduleRewriter.rewrite(AddNRewriter.rewrite(gd, scheduled.chains()),
              scheduled.edges());
          model = scheduled.graph();
          ctx = context(gd, model);
        } else {
          scheduled = null;
        }
      }
      plan = mode.plan(model, ctx);
    } catch (PlanningException e) {
      if (!budget.isSet() || givenPeak > budget.bytes()) {
        throw e;
      }
      if (allocatorCheck && !AllocatorCheck.fits(givenModel, budget.bytes(), layouts)) {
        long need = AllocatorCheck.needBytes(givenModel, budget.bytes(), layouts);
        throw new PlanningException(e.getMessage() + " The graph as given needs about "
            + Budget.mibUp(need) + " MiB of TensorFlow's allocator (whole chunks, regions).",
            Math.min(e.smallestBudgetBytes(), need));
      }
      // never worse than TensorFlow: no plan keeps the memory ratio's margin, but the graph as
      // given is predicted to fit the whole budget (live bytes and the allocator's replay), where
      // TensorFlow may well train it; it is left as it was (run and train probe it first)
      LOG.warn("[LMS][0] No plan keeps the memory ratio's margin ({}), but the graph as given "
          + "is predicted to fit the whole budget ({} of {} MiB): it is left as it was{}, with no "
          + "margin", e.getMessage(), String.format("%.1f", givenPeak / 1048576.0),
          String.format("%.1f", budget.bytes() / 1048576.0),
          givenPre.initConstants() > 0 ? " (its initializer Fills kept from folding)" : "");
      asGiven = true;
      if (allocatorCheck) {
        // it fits the replay, but the check did not accept it (no headroom was asked of it)
        overNeed = Math.max(1, AllocatorCheck.needBytes(givenModel, budget.bytes(), layouts));
      }
    }
    // a rewritten graph runs in the serial order, its unchained ops as TensorFlow runs them
    // (each plan's in the graph it is committed to: its ops change what the chain leaves out;
    // the plan kept is committed once, for the check and for the graph handed back)
    GraphDef planFor = gd;
    Map<MemoryPlan, GraphDef> commits = new java.util.IdentityHashMap<>();
    Function<MemoryPlan, GraphDef> committed = p -> commits.computeIfAbsent(p,
        q -> commit(planFor, q, trainOp));
    StepOrder steps = ordered && allocatorCheck && budget.isSet() && mode.plans()
        ? StepOrder.serial(gd, feedShapes, runOps, committed) : StepOrder.levelled();
    if (!asGiven && allocatorCheck && budget.isSet() && mode.plans() && budgetShapesPlan()) {
      DataflowGraph planned = model;
      // where none of this mode's plans fits the replay, the modes a probe would try next
      List<Function<PlanningContext, MemoryPlan>> others = alternatives().stream()
          .map(m -> (Function<PlanningContext, MemoryPlan>) c -> m.plan(planned, c)).toList();
      AllocatorCheck.Outcome o = AllocatorCheck.check(model, givenModel, ctx, plan,
          c -> mode.plan(planned, c), layouts, steps, others);
      overNeed = o.needBytes();
      if (o.asGiven()) {
        asGiven = true;
      } else {
        plan = o.plan();
      }
    }
    if (!asGiven && !plan.needed() && scheduled == null && pre.changed()
        && budget.fits(givenPeak)) {
      // the graph as given fits: LMS is not necessary, and the graph is left as it was
      LOG.info("[LMS][0] The graph fits as given: the rewrites before planning are not kept");
      asGiven = true;
    }
    if (asGiven) {
      gd = givenGd;
      model = givenModel;
      pre = givenPre;
      scheduled = null;
      plan = MemoryPlan.unchanged(mode.cliName(), model, context(gd, model), givenPeak);
    }
    // a plan that rewrites anything was made for planFor (the graph as given replaces gd only
    // together with an unchanged plan)
    GraphDef out = plan.needed() ? committed.apply(plan) : gd;
    LmsResult.InitLayout initLayout = null;
    if (layouts) {
      Set<String> stepOps = runOps.isEmpty() && trainOp != null ? Set.of(trainOp) : runOps;
      OrderedInit o = orderInit(out, plan.needed() ? plan.applyTo(model) : model, initOp,
          stepOps, asGiven && ordered ? StepOrder.serial(gd, feedShapes, runOps)
              : steps.forPlan(plan));
      if (o != null) {
        out = o.graphDef();
        initLayout = o.layout();
      }
    }
    List<String> cycle = out == given ? List.of() : ScheduleRewriter.cycle(out);
    if (!cycle.isEmpty() && ScheduleRewriter.cycle(given).isEmpty()) {
      // TensorFlow would run a step of it without an error, skipping the ops on the cycle and
      // everything after them (updates included); where the graph as given has such a cycle
      // already, the merge is not what TensorFlow does with it and the check does not apply
      if (scheduled != null) {
        LOG.warn("[LMS][0] The {} schedule and the plan together close a cycle through {} "
            + "(counting the filter and bias gradients oneDNN merges as one op); planning again "
            + "without the schedule", scheduler.name().toLowerCase(java.util.Locale.ROOT), cycle);
        return source.copy().scheduler(Scheduling.Scheduler.NONE).build().rewritePlanned(given,
            feedShapes, trainOp, runOps, initOp, ordered);
      }
      throw new IllegalStateException("lms4j's rewrite closed a cycle through " + cycle
          + " (counting the filter and bias gradients oneDNN merges as one op); TensorFlow "
          + "would skip those ops without an error. Please report this graph.");
    }
    int added = out.getNodeCount() - given.getNodeCount();
    String replayLog = System.getenv(REPLAY_LOG_ENV);
    if (replayLog != null && budget.isSet()) {
      writeReplay(Path.of(replayLog), plan.needed() ? plan.applyTo(model) : model,
          asGiven && ordered ? StepOrder.serial(gd, feedShapes, runOps) : steps.forPlan(plan),
          initLayout);
    }
    if (dumpDot != null) {
      DotDump.write(dumpDot, given, out, plan);
      LOG.info("[LMS][0] Wrote the graph before and after as {}", DotDump.files(dumpDot));
    }
    long planningMs = ms(t0);
    PlanCommit.log(plan, mode, added, planningMs, plan.swaps().isEmpty() ? null : mechanism());
    return new Planned(new LmsResult(out, plan, model, stats, before, planningMs, added,
        scheduled, pre, initLayout), overNeed);
  }

  /**
   * Writes the allocator model's requests for a step of {@code r} (the graph handed back) under
   * the budget to {@code file}, in the format of TensorFlow's allocator log as
   * {@link dev.lms4j.tf.run.AllocatorLog} writes it ({@link BfcReplay#requests}): run with both
   * {@code LMS4J_BFC_LOG} and {@link #REPLAY_LOG_ENV}, the two files side by side show where the
   * model's request sequence leaves TensorFlow's.
   */
  private void writeReplay(Path file, DataflowGraph r, StepOrder steps,
      LmsResult.InitLayout init) {
    BfcReplay.Layout layout = BfcReplay.Layout.GRAPH_ORDER;
    if (init != null) {
      int[] last = init.last().stream().mapToInt(n -> r.op(n).orElseThrow().id()).toArray();
      layout = new BfcReplay.Layout(last, init.primerBytes(), init.primerFirst());
    }
    List<String> lines = new ArrayList<>();
    BfcReplay.Result res = BfcReplay.requests(r, steps.orders(r).get(0), budget.bytes(), layout,
        lines::add);
    try {
      Files.write(file, lines);
    } catch (IOException e) {
      // a diagnostic file: the run goes on without it
      LOG.warn("[LMS][0] Could not write the allocator model's requests to {}: {}", file,
          e.toString());
      return;
    }
    long granted = lines.stream().filter(l -> l.startsWith("A ")).count();
    LOG.info("[LMS][0] The allocator model's {} requests for init and two steps under {} MiB "
        + "({}) written to {}", granted, Budget.mib(budget.bytes()), res.fits() ? "fits"
        : "refuses " + res.failedBytes() + " bytes for " + res.failedOp(), file);
  }

  /** The graph {@code plan} makes of {@code gd}, with this instance's swap tier and mechanism. */
  private GraphDef commit(GraphDef gd, MemoryPlan plan, String trainOp) {
    return PlanCommit.apply(gd, plan, params.tier(), swapDir, trainOp,
        plan.swaps().isEmpty() ? SwapRewriter.Mechanism.STANDARD : mechanism());
  }

  /** {@code gd} with its init ordered, and the order. */
  private record OrderedInit(GraphDef graphDef, LmsResult.InitLayout layout) {}

  /**
   * {@code gd} with init creating its variables in the order the allocator model finds lets a
   * step of {@code stepModel} fit the budget ({@link InitOrder}); null where no order is needed
   * or init cannot be given it.
   */
  private OrderedInit orderInit(GraphDef gd, DataflowGraph stepModel, String initOp,
      Set<String> stepOps, StepOrder steps) {
    ResidentLayouts.Choice c = AllocatorCheck.layout(stepModel, budget.bytes(), steps);
    if (c == null) {
      return null;
    }
    List<String> last = new ArrayList<>();
    for (int v : c.layout().last()) {
      last.add(stepModel.op(v).name());
    }
    InitOrder.Result r = InitOrder.apply(gd, initOp, stepOps, last, c.layout().primerBytes(),
        c.layout().primerFirst());
    if (!r.changed()) {
      return null;
    }
    LmsResult.InitLayout l = new LmsResult.InitLayout(last, c.layout().primerBytes(),
        c.layout().primerFirst(), AllocatorCheck.needBytes(stepModel, budget.bytes(), false,
        steps),
        c.needBytes());
    LOG.info("[LMS][0] Init order: {}", l.describe());
    return new OrderedInit(r.graphDef(), l);
  }

  /** True when the mode's plan depends on the budget (not sqrt, not TFLMS set by hand). */
  private boolean budgetShapesPlan() {
    return mode != LmsMode.SQRT && !(mode == LmsMode.TFLMS && !params.autoTune());
  }

  /** The graph model of {@code gd}, with the measured scratch when there is some. */
  private DataflowGraph importModel(GraphDef gd, Map<String, long[]> feedShapes,
      Set<String> runOps) {
    DataflowGraph m = GraphImporter.importGraph(gd, feedShapes, params.batchSize(),
        backwardScope, runOps);
    // kept with the imported graph (which the importer keeps too), so that planning the same
    // graph again with the same scratch reuses what was derived from it
    return scratch.isEmpty() ? m
        : m.derived(new WithScratch(Map.copyOf(scratch)), g -> g.withScratch(scratch));
  }

  /** The key of a graph's copy with {@code scratch} among its derived values. */
  private record WithScratch(Map<String, Long> scratch) {}

  /** The planning context for {@code model} (the tensor policy from {@link PolicySources}). */
  private PlanningContext context(GraphDef gd, DataflowGraph model) {
    return new PlanningContext(budget, mode.plans() ? costModel() : costModel, params,
        PolicySources.policy(gd, model, params, recomputeOps), smallNodeLimitBytes, rematDump);
  }

  private static long ms(long t0) {
    return (System.nanoTime() - t0) / 1_000_000;
  }
}
