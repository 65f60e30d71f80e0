package dev.lms4j.core.schedule;

import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The scheduling step LMS runs before planning, as grappler's scheduling pass and XLA's
 * memory-minimising schedulers do: {@code AddN}s with more than two inputs become chains that
 * add each gradient as it arrives ({@link AddNChains}), then the chosen scheduler orders the
 * graph and {@link ScheduleEdges} (strict mode) adds only the control edges that make TensorFlow
 * run that order. The returned graph's levelled schedule is the chosen order, so every planner
 * (swap, recompute, rematerialization) plans on it unchanged.
 *
 * <p>Neither step is kept when it would raise the simulated peak: the AddN chains are dropped
 * when the graph without them schedules lower, and a scheduler whose order peaks higher than the
 * levelled order of the same graph, or lowers it by less than {@link #MIN_GAIN}, is not
 * enforced (no edges).
 *
 * <pre>{@code
 * Scheduling.Result s = Scheduling.apply(graph, Scheduling.Scheduler.BEST);
 * // mirror it on the GraphDef: AddNRewriter.rewrite(gd, s.chains()), then
 * // ScheduleRewriter.rewrite(..., s.edges()); plan on s.graph()
 * }</pre>
 */
public final class Scheduling {
  private static final Logger LOG = LoggerFactory.getLogger(Scheduling.class);

  /**
   * Gain below which a schedule is not enforced: 2% of the levelled peak, the simulator's error
   * against measured peaks (as {@code ScheduleRewriter.MIN_GAIN}; control edges can block
   * oneDNN's fusions, so a schedule that saves less is not worth them).
   */
  public static final double MIN_GAIN = 0.02;

  private Scheduling() {}

  /** The scheduler run before planning. */
  public enum Scheduler {
    /** No scheduling step: the graph as it is (TensorFlow's levelled order). */
    NONE,
    /** {@link PostOrderScheduler}. */
    POSTORDER,
    /** {@link DfsScheduler}. */
    DFS,
    /** {@link ListScheduler}. */
    LIST,
    /** The lowest simulated peak of the levelled order and the three schedulers. */
    BEST;

    /** Parses {@code none|postorder|dfs|list|best} (case-insensitive). */
    public static Scheduler parse(String s) {
      try {
        return valueOf(s.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("unknown scheduler '" + s
            + "' (expected none, postorder, dfs, list or best)");
      }
    }
  }

  /**
   * The outcome of {@link #apply}.
   *
   * @param graph      the graph to plan on (AddN chains and schedule edges applied)
   * @param chains     the AddN chains applied (empty when none or when they did not help)
   * @param edges      the control edges that enforce the schedule (empty: levelled order)
   * @param kind       the schedule enforced ({@link Schedulers.Kind#LEVELS} when none)
   * @param peakBefore simulated peak of the input graph (levelled order)
   * @param peakAfter  simulated peak of {@link #graph()} (levelled order = the schedule)
   */
  public record Result(DataflowGraph graph, List<AddNChains.Chain> chains,
      List<ScheduleEdges.Edge> edges, Schedulers.Kind kind, long peakBefore, long peakAfter) {
    /** Copies the lists. */
    public Result {
      Objects.requireNonNull(graph);
      chains = List.copyOf(chains);
      edges = List.copyOf(edges);
    }

    /** True when the graph was changed. */
    public boolean changed() {
      return !chains.isEmpty() || !edges.isEmpty();
    }
  }

  /** Simulated peak of {@code g} in its levelled order. */
  public static long levelledPeak(DataflowGraph g) {
    return MemorySimulator.levelledPeak(g);
  }

  /** {@link #apply(DataflowGraph, Scheduler, double)} with {@link #MIN_GAIN}. */
  public static Result apply(DataflowGraph g, Scheduler s) {
    return apply(g, s, MIN_GAIN);
  }

  /**
   * Runs the scheduling step; {@link Scheduler#NONE} returns the graph unchanged.
   *
   * @param minGain a schedule is enforced only when it lowers the levelled peak of the same
   *                graph by more than this fraction, in [0, 1)
   */
  public static Result apply(DataflowGraph g, Scheduler s, double minGain) {
    if (!(minGain >= 0 && minGain < 1)) {
      throw new IllegalArgumentException("minGain must be in [0, 1): " + minGain);
    }
    long before = levelledPeak(g);
    if (s == Scheduler.NONE) {
      return new Result(g, List.of(), List.of(), Schedulers.Kind.LEVELS, before, before);
    }
    List<AddNChains.Chain> chains = AddNChains.plan(g, Levels.of(g).schedule());
    Result plain = schedule(g, List.of(), s, before, minGain);
    Result best = plain;
    if (!chains.isEmpty()) {
      Result chained = schedule(AddNChains.apply(g, chains), chains, s, before, minGain);
      if (chained.peakAfter() <= plain.peakAfter()) {
        best = chained;
      }
    }
    LOG.info("[LMS][0] Scheduling ({}): {} AddN chains, {} schedule, {} control edges; "
        + "simulated peak {} MiB -> {} MiB", s.name().toLowerCase(Locale.ROOT),
        best.chains().size(), best.kind(), best.edges().size(), before >> 20,
        best.peakAfter() >> 20);
    return best;
  }

  private static Result schedule(DataflowGraph g, List<AddNChains.Chain> chains, Scheduler s,
      long before, double minGain) {
    long levelled = levelledPeak(g);
    Schedulers.Kind kind;
    int[] order;
    long peak;
    if (s == Scheduler.BEST) {
      Schedulers.Choice c = Schedulers.best(g);
      kind = c.kind();
      order = c.order();
      peak = c.peakBytes();
    } else {
      kind = switch (s) {
        case POSTORDER -> Schedulers.Kind.POST_ORDER;
        case DFS -> Schedulers.Kind.DFS;
        default -> Schedulers.Kind.LIST;
      };
      order = Schedulers.schedule(g, kind);
      peak = MemorySimulator.simulate(g, order).peakBytes();
    }
    if (kind == Schedulers.Kind.LEVELS || peak >= levelled || peak > levelled * (1 - minGain)) {
      if (kind != Schedulers.Kind.LEVELS) {
        LOG.info("[LMS][0] The {} schedule peaks at {} MiB, the levelled order at {} MiB: "
            + "keeping the levelled order (a schedule must lower it by more than {}%)", kind,
            peak >> 20, levelled >> 20, minGain * 100);
      }
      return new Result(g, chains, List.of(), Schedulers.Kind.LEVELS, before, levelled);
    }
    List<ScheduleEdges.Edge> edges = ScheduleEdges.of(g, order);
    DataflowGraph ordered = ScheduleEdges.apply(g, edges);
    return new Result(ordered, chains, edges, kind, before, levelledPeak(ordered));
  }
}
