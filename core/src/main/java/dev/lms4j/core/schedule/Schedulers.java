package dev.lms4j.core.schedule;

import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.Collections;
import java.util.EnumMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The memory-minimising schedulers side by side, as XLA's default scheduler runs them: each gives
 * a topological order of the graph's ops, {@link MemorySimulator} gives its peak, and the lowest
 * peak wins.
 *
 * <pre>{@code
 * Schedulers.Choice c = Schedulers.best(graph);
 * log.info("{} schedule: peak {} B (levelled {} B)", c.kind(), c.peakBytes(),
 *     c.peaks().get(Schedulers.Kind.LEVELS));
 * List<ScheduleEdges.Edge> edges = ScheduleEdges.of(graph, c.order());
 * }</pre>
 *
 * Every schedule keeps the order in which TensorFlow runs accesses to one variable (a weight's
 * gradient read and its update), so reordering does not change what a step computes. Output is
 * deterministic: ties are broken by op id or name, never by hash order.
 */
public final class Schedulers {
  private static final Logger LOG = LoggerFactory.getLogger(Schedulers.class);

  private Schedulers() {}

  /** A scheduler. On equal peaks {@link #best} prefers the one declared first. */
  public enum Kind {
    /** TFLMS's levelled order ({@link Levels#schedule()}): lms4j's model of TensorFlow's. */
    LEVELS,
    /** {@link ListScheduler}: greedy, most bytes freed net of bytes allocated first. */
    LIST,
    /** {@link DfsScheduler}: post-order, heaviest input subtree first. */
    DFS,
    /** {@link PostOrderScheduler}: post-order, inputs in their order. */
    POST_ORDER
  }

  /**
   * The outcome of {@link #best}.
   *
   * @param kind      the scheduler with the lowest simulated peak
   * @param order     its schedule (op ids)
   * @param peakBytes its simulated peak
   * @param peaks     every scheduler's simulated peak, in {@link Kind} order
   */
  public record Choice(Kind kind, int[] order, long peakBytes, Map<Kind, Long> peaks) {
    /** Copies the arguments. */
    public Choice {
      order = order.clone();
      peaks = Collections.unmodifiableMap(new EnumMap<>(peaks));
    }

    /** The schedule (a copy). */
    @Override
    public int[] order() {
      return order.clone();
    }
  }

  /** The schedule one scheduler gives for {@code g}. */
  public static int[] schedule(DataflowGraph g, Kind kind) {
    return schedule(ScheduleGraph.of(g), kind);
  }

  /**
   * Runs every scheduler on {@code g} and returns the one with the lowest simulated peak
   * (on ties, the first in {@link Kind} order: the levelled schedule when nothing beats it).
   */
  public static Choice best(DataflowGraph g) {
    long t0 = System.nanoTime();
    ScheduleGraph sg = ScheduleGraph.of(g);
    Map<Kind, Long> peaks = new EnumMap<>(Kind.class);
    Kind bestKind = null;
    int[] bestOrder = null;
    long bestPeak = Long.MAX_VALUE;
    for (Kind k : Kind.values()) {
      int[] order = schedule(sg, k);
      long peak = MemorySimulator.simulate(g, order).peakBytes();
      peaks.put(k, peak);
      if (peak < bestPeak) {
        bestKind = k;
        bestOrder = order;
        bestPeak = peak;
      }
    }
    LOG.debug("schedules of {} ops: peaks {}; {} wins ({} ms)", g.size(), peaks, bestKind,
        (System.nanoTime() - t0) / 1_000_000);
    return new Choice(bestKind, bestOrder, bestPeak, peaks);
  }

  private static int[] schedule(ScheduleGraph sg, Kind kind) {
    return switch (kind) {
      case LEVELS -> sg.levelled.clone();
      case LIST -> ListScheduler.schedule(sg);
      case DFS -> DfsScheduler.schedule(sg);
      case POST_ORDER -> PostOrderScheduler.schedule(sg);
    };
  }
}
