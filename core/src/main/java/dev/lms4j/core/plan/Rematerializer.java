package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.schedule.Scheduling;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Rematerialization under a memory limit, after XLA's {@code HloRematerialization} pass and
 * Microsoft's path heuristic for it: picks forward ops to recompute in the backward pass until
 * the simulated peak fits the limit. The output is a {@link RecomputePlan} (the ops chosen form
 * connected groups, see {@link RecomputePlanner#manual}) that {@code RecomputeRewriter} applies.
 *
 * <ul>
 *   <li>{@link Mode#STANDARD}: at the simulated peak, the live tensors that could be recomputed
 *       are scored by bytes saved at the peak (their size, minus inputs that the clone keeps
 *       alive across the peak) per microsecond of recompute time ({@link CostModel}); a block of
 *       up to {@code blockSizeLimit} ops (the tensor's producer and producers of its inputs
 *       that are dead at the peak) is recomputed together. The best blocks are tried, several
 *       at once while their estimated savings do not yet cover the excess; a try is kept when
 *       the simulated peak (or, at an equal peak, the bytes above the limit summed over the
 *       step) drops, else the block is rejected. When no block helps, the block size doubles up
 *       to {@code maxBlockSize} (XLA's {@code block_size_limit} growing by its factor).</li>
 *   <li>{@link Mode#PATH}: every recomputable forward op on a path into the backward pass is
 *       recomputed, then the articulation ops of those paths (ops whose removal splits a
 *       recomputed group: the checkpoints of Chen et al.) are kept again, expensive ones and
 *       evenly spread ones first, as long as the peak stays within the limit.</li>
 * </ul>
 *
 * Only ops the options' {@link TensorPolicy} lets recompute are candidates (built in: never
 * random or stateful ops, feeds, variables or constants), and never ops whose transient outputs
 * are smaller than {@code smallNodeLimitBytes}. The search lives in package-private classes:
 * {@link RematSearch} (state and driver), {@link RematEval} (one simulation),
 * {@link RematStandard} and {@link RematPath} (the modes), {@link RematArticulation} and
 * {@link RematDump}. The search is bounded by
 * {@code maxSimulations} simulator runs; when the limit cannot be met, {@link #plan} throws a
 * {@link PlanningException} naming the smallest peak reached.
 *
 * <pre>{@code
 * Rematerializer.Result r = Rematerializer.plan(graph, 400L << 20,
 *     Rematerializer.Options.defaults().withMode(Rematerializer.Mode.PATH));
 * GraphDef out = RecomputeRewriter.rewrite(gd, r.plan());
 * }</pre>
 */
public final class Rematerializer {
  private static final Logger LOG = LoggerFactory.getLogger(Rematerializer.class);

  /** How ops to recompute are chosen. */
  public enum Mode {
    /** XLA's greedy: best memory saved per recompute cost at the peak, in blocks. */
    STANDARD,
    /** Whole paths recomputed, then articulation ops kept while within the limit. */
    PATH;

    /** Parses {@code standard|path} (case-insensitive). */
    public static Mode parse(String s) {
      try {
        return valueOf(s.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("unknown remat mode '" + s
            + "' (expected standard or path)");
      }
    }
  }

  /**
   * Options of a run.
   *
   * @param mode                how ops are chosen
   * @param smallNodeLimitBytes ops whose transient outputs are smaller are never recomputed
   * @param blockSizeLimit      ops per recomputed block at first (XLA's block_size_limit)
   * @param maxBlockSize        the block size grows (doubling) up to this when nothing helps
   * @param scheduler           scheduling step run before planning
   * @param costModel           recompute cost of an op
   * @param maxSimulations      bound on simulator runs (the search stops there)
   * @param policy              what may be recomputed; null for the built-in rules
   *                            ({@link TensorPolicy#builtin}, computed when planning)
   */
  public record Options(Mode mode, long smallNodeLimitBytes, int blockSizeLimit, int maxBlockSize,
      Scheduling.Scheduler scheduler, CostModel costModel, int maxSimulations,
      TensorPolicy policy) {
    /** Checks the values. */
    public Options {
      Objects.requireNonNull(mode);
      Objects.requireNonNull(scheduler);
      Objects.requireNonNull(costModel);
      if (smallNodeLimitBytes < 0) {
        throw new IllegalArgumentException("small node limit must be >= 0");
      }
      if (blockSizeLimit < 1 || maxBlockSize < blockSizeLimit) {
        throw new IllegalArgumentException("need 1 <= blockSizeLimit <= maxBlockSize");
      }
      if (maxSimulations < 1) {
        throw new IllegalArgumentException("maxSimulations must be >= 1");
      }
    }

    /** Options with the built-in tensor policy. */
    public Options(Mode mode, long smallNodeLimitBytes, int blockSizeLimit, int maxBlockSize,
        Scheduling.Scheduler scheduler, CostModel costModel, int maxSimulations) {
      this(mode, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, scheduler, costModel,
          maxSimulations, null);
    }

    /** Standard mode, no small-node limit, blocks of 1 growing to 16, no scheduling. */
    public static Options defaults() {
      return new Options(Mode.STANDARD, 0, 1, 16, Scheduling.Scheduler.NONE,
          CostModel.defaults(), 5000);
    }

    /** The same options in another mode. */
    public Options withMode(Mode m) {
      return new Options(m, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, scheduler,
          costModel, maxSimulations, policy);
    }

    /** The same options with another small-node limit (bytes). */
    public Options withSmallNodeLimit(long bytes) {
      return new Options(mode, bytes, blockSizeLimit, maxBlockSize, scheduler, costModel,
          maxSimulations, policy);
    }

    /** The same options with other block sizes. */
    public Options withBlockSizes(int initial, int max) {
      return new Options(mode, smallNodeLimitBytes, initial, max, scheduler, costModel,
          maxSimulations, policy);
    }

    /** The same options with another scheduling step. */
    public Options withScheduler(Scheduling.Scheduler s) {
      return new Options(mode, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, s, costModel,
          maxSimulations, policy);
    }

    /** The same options with another cost model. */
    public Options withCostModel(CostModel cm) {
      return new Options(mode, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, scheduler, cm,
          maxSimulations, policy);
    }

    /** The same options with another bound on simulator runs. */
    public Options withMaxSimulations(int n) {
      return new Options(mode, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, scheduler,
          costModel, n, policy);
    }

    /** The same options with another tensor policy (null: the built-in rules). */
    public Options withPolicy(TensorPolicy p) {
      return new Options(mode, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, scheduler,
          costModel, maxSimulations, p);
    }
  }

  /**
   * One step of the search, for the dump.
   *
   * @param step           index
   * @param action         {@code remat} (kept), {@code reject}, {@code grow-block}, {@code path}
   *                       (the initial whole-path set), {@code undo} (an articulation op kept
   *                       again), {@code keep-remat} (an undo that was refused) or
   *                       {@code standard} (path mode goes on in standard mode from here)
   * @param ops            the ops concerned
   * @param estimatedBytes estimated bytes saved at the peak (standard mode), else 0
   * @param costUs         predicted recompute time of the ops, microseconds
   * @param peakBytes      simulated peak after the step (kept or not)
   */
  public record Decision(int step, String action, List<String> ops, long estimatedBytes,
      double costUs, long peakBytes) {
    /** Copies the list. */
    public Decision {
      ops = List.copyOf(ops);
    }
  }

  /**
   * The outcome.
   *
   * @param plan        the ops to recompute
   * @param graph       the graph planned on (the input after the scheduling step); the plan's
   *                    triggers assume its order, so apply {@link #scheduling()} too
   * @param scheduling  the scheduling step's outcome
   * @param limitBytes  the limit
   * @param peakBefore  simulated peak of {@link #graph()} without recomputation
   * @param peakAfter   simulated peak with the plan
   * @param simulations simulator runs
   * @param decisions   the search, step by step
   * @param options     the options used
   */
  public record Result(RecomputePlan plan, DataflowGraph graph, Scheduling.Result scheduling,
      long limitBytes, long peakBefore, long peakAfter, int simulations,
      List<Decision> decisions, Options options) {
    /** Copies the list. */
    public Result {
      decisions = List.copyOf(decisions);
    }

    /** True when the simulated peak with the plan is within the limit. */
    public boolean fits() {
      return peakAfter <= limitBytes;
    }

    /** True when recomputation was needed (the peak without it was above the limit). */
    public boolean needed() {
      return peakBefore > limitBytes;
    }

    /**
     * Writes per-op memory (schedule position, op, type, category, bytes in use while it runs,
     * whether it is recomputed or a clone) and the decisions: JSON when the file name ends in
     * {@code .json}, else tab-separated text.
     */
    public void dump(Path file) {
      RematDump.write(this, file);
    }
  }

  private Rematerializer() {}

  /**
   * Plans recomputation so that the simulated peak fits {@code limitBytes}.
   *
   * @throws PlanningException when it cannot; {@link PlanningException#smallestBudgetBytes()}
   *                           is the smallest peak reached
   */
  public static Result plan(DataflowGraph g, long limitBytes, Options o) {
    Result r = bestEffort(g, limitBytes, o);
    if (!r.fits()) {
      throw new PlanningException("Rematerialization (" + o.mode().name()
          .toLowerCase(Locale.ROOT) + ") cannot fit a limit of " + mibUp(limitBytes)
          + " MiB: the smallest simulated peak reached was " + mibUp(r.peakAfter())
          + " MiB, the smallest limit that could work with it.", r.peakAfter());
    }
    return r;
  }

  /** As {@link #plan}, but returns the lowest peak found instead of failing. */
  public static Result bestEffort(DataflowGraph g, long limitBytes, Options o) {
    long t0 = System.nanoTime();
    Scheduling.Result s = Scheduling.apply(g, o.scheduler());
    TensorPolicy policy = o.policy() != null ? o.policy() : TensorPolicy.builtin(s.graph());
    Result r = new RematSearch(s.graph(), limitBytes, o, policy::mayRecompute).run(s);
    LOG.info("[LMS][0] Rematerialization ({}): {} ops recomputed in {} groups, simulated peak "
        + "{} MiB -> {} MiB (limit {} MiB), {} simulations, {} ms",
        o.mode().name().toLowerCase(Locale.ROOT), r.plan().clonedOps(), r.plan().groups().size(),
        r.peakBefore() >> 20, r.peakAfter() >> 20, limitBytes >> 20, r.simulations(),
        (System.nanoTime() - t0) / 1_000_000);
    return r;
  }

  private static long mibUp(long b) {
    return (b + (1 << 20) - 1) >> 20;
  }
}
