package dev.lms4j.core.schedule;

import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The control edges that make TensorFlow run a chosen schedule, and no more than it needs.
 *
 * <p><b>Which ops are ordered.</b> Only the <i>memory-relevant</i> ops: those that allocate
 * transient device memory or read a transient tensor (and so may be the reader that frees it).
 * The simulated peak depends only on their order: any other op (a constant, a variable, a feed,
 * a {@code NoOp}, an update fed by resident tensors only) neither allocates nor frees, so it may
 * run anywhere. Ops grappler folds into constants (shape computations) are left free too: they
 * are gone from the graph TensorFlow runs. Accesses to a variable that another op updates are
 * ordered as well, with a real edge unless a path already orders them: their order changes the
 * numbers, and once other edges move ops, TensorFlow's executor was seen swapping such a pair
 * (a weight's update before its gradient read it) when only levels ordered it.
 *
 * <p><b>When an edge is added</b> ({@link Mode#STRICT}, the default). Walking the schedule, a
 * memory-relevant op {@code v} gets the edge {@code u -> v} from the memory-relevant op {@code u}
 * just before it unless the graph, with the edges added so far, already has a path from
 * {@code u} to {@code v}: otherwise {@code v} could become ready before {@code u} has run. The
 * memory-relevant ops then run in exactly the schedule's order under any executor.
 *
 * <p>{@link Mode#LEVELLED} adds fewer edges by trusting lms4j's model of the executor: with
 * {@code inter_op_parallelism_threads = -1} TensorFlow runs ready ops first in, first out, which
 * the simulator and the swap planner model as the levelled schedule of the graph it is given. An
 * edge {@code u -> v} is added only when {@code v} would otherwise come before {@code u} in that
 * order (a lower level, or the same level and a lower id); it lifts {@code v} one level above
 * {@code u}. The levelled schedule itself then needs no edge at all (not even for variable
 * accesses: the graph is left as it is, so TensorFlow runs it as before). Measured on the zoo's
 * resnet, TensorFlow's order deviates from the model in a few places, which this mode lets
 * through.
 *
 * <p>In both modes the levelled schedule of the graph with the edges orders the memory-relevant
 * ops as the chosen schedule does, so it has the same simulated peak:
 *
 * <pre>{@code
 * Schedulers.Choice c = Schedulers.best(graph);
 * List<ScheduleEdges.Edge> edges = ScheduleEdges.of(graph, c.order());
 * DataflowGraph ordered = ScheduleEdges.apply(graph, edges);
 * // MemorySimulator.simulate(ordered, Levels.of(ordered).schedule()).peakBytes() == c.peakBytes()
 * }</pre>
 *
 * O(ops + edges) in strict mode; levelled mode adds O((ops + edges) * k / 64) to find which of
 * the {@code k} variable accessors that precede an update already reach it through a path.
 */
public final class ScheduleEdges {
  private static final Logger LOG = LoggerFactory.getLogger(ScheduleEdges.class);

  private ScheduleEdges() {}

  /** How much of the executor's behaviour the edges may rely on. */
  public enum Mode {
    /** Rely on nothing but the edges: a total order of the memory-relevant ops. */
    STRICT,
    /** Rely on TensorFlow running ready ops level by level (lms4j's model): fewer edges. */
    LEVELLED
  }

  /**
   * A control edge: {@code to} waits for {@code from}.
   *
   * @param from the op that runs first
   * @param to   the op that waits (gets the input {@code ^from})
   */
  public record Edge(String from, String to) {
    /** Checks the names. */
    public Edge {
      Objects.requireNonNull(from);
      Objects.requireNonNull(to);
      if (from.equals(to)) {
        throw new IllegalArgumentException("an op cannot wait for itself: " + from);
      }
    }
  }

  /** The edges that enforce {@code schedule} in {@link Mode#STRICT} mode. */
  public static List<Edge> of(DataflowGraph g, int[] schedule) {
    return of(g, schedule, Mode.STRICT);
  }

  /**
   * The edges that enforce {@code schedule}, in the order of the ops that wait (as they come in
   * the schedule).
   *
   * @throws IllegalArgumentException when {@code schedule} is not a topological order of
   *                                  {@code g}, or reorders two accesses to one variable that
   *                                  TensorFlow runs in the other order
   */
  public static List<Edge> of(DataflowGraph g, int[] schedule, Mode mode) {
    ScheduleGraph sg = ScheduleGraph.of(g);
    sg.positions(schedule);
    boolean[] relevant = relevant(sg);
    List<Edge> edges;
    if (mode == Mode.STRICT) {
      // the chain orders relevant ops: only pairs with another op need a path or an edge
      edges = strict(sg, schedule, relevant, unorderedHazards(sg, relevant, false));
    } else {
      // a graph left as it is runs as it did; once edges move ops, variable accesses get theirs
      edges = levelled(sg, schedule, relevant, new int[sg.n][0]);
      if (!edges.isEmpty()) {
        edges = levelled(sg, schedule, relevant, unorderedHazards(sg, relevant, true));
      }
    }
    int count = 0;
    for (boolean r : relevant) {
      count += r ? 1 : 0;
    }
    LOG.debug("{} control edges ({}) order {} memory-relevant ops of {}", edges.size(), mode,
        count, g.size());
    return edges;
  }

  /**
   * A new graph with the edges added as control inputs (edges already present are skipped).
   *
   * @throws IllegalArgumentException when an edge names an unknown op or closes a cycle
   */
  public static DataflowGraph apply(DataflowGraph g, List<Edge> edges) {
    Map<Integer, Set<Integer>> extra = new LinkedHashMap<>();
    for (Edge e : edges) {
      int from = g.opOrThrow(e.from()).id();
      int to = g.opOrThrow(e.to()).id();
      extra.computeIfAbsent(to, k -> new LinkedHashSet<>(g.op(k).controlInputs())).add(from);
    }
    Map<Integer, Op> replaced = new LinkedHashMap<>();
    for (Map.Entry<Integer, Set<Integer>> en : extra.entrySet()) {
      Op o = g.op(en.getKey());
      replaced.put(o.id(), new Op(o.id(), o.name(), o.type(), o.category(), o.device(),
          o.inputs(), new ArrayList<>(en.getValue()), o.outputs()));
    }
    return g.withEdits(replaced, List.of());
  }

  private static List<Edge> levelled(ScheduleGraph sg, int[] schedule, boolean[] relevant,
      int[][] hazards) {
    DataflowGraph g = sg.g;
    int[] level = new int[sg.n];
    List<Edge> edges = new ArrayList<>();
    int prev = -1;
    for (int v : schedule) {
      int l = 0;
      for (int i = 0, np = g.predecessorCount(v); i < np; i++) {
        l = Math.max(l, level[g.predecessor(v, i)] + 1);
      }
      for (int h : hazards[v]) {
        edges.add(new Edge(g.op(h).name(), g.op(v).name()));
        l = Math.max(l, level[h] + 1);
      }
      if (relevant[v]) {
        if (prev >= 0 && (l < level[prev] || (l == level[prev] && v < prev))) {
          edges.add(new Edge(g.op(prev).name(), g.op(v).name()));
          l = level[prev] + 1;
        }
        prev = v;
      }
      level[v] = l;
    }
    return dedup(edges);
  }

  private static List<Edge> strict(ScheduleGraph sg, int[] schedule, boolean[] relevant,
      int[][] hazards) {
    DataflowGraph g = sg.g;
    // after[v]: rank (among relevant ops, in schedule order) of the latest relevant op that is
    // certain to have run when v runs; -1 when none
    int[] after = new int[sg.n];
    int[] chain = new int[sg.n];
    int rank = 0;
    List<Edge> edges = new ArrayList<>();
    for (int v : schedule) {
      int a = -1;
      for (int i = 0, np = g.predecessorCount(v); i < np; i++) {
        a = Math.max(a, after[g.predecessor(v, i)]);
      }
      for (int h : hazards[v]) {
        edges.add(new Edge(g.op(h).name(), g.op(v).name()));
        a = Math.max(a, after[h]);
      }
      if (relevant[v]) {
        if (rank > 0 && a < rank - 1) {
          edges.add(new Edge(g.op(chain[rank - 1]).name(), g.op(v).name()));
        }
        chain[rank] = v;
        a = rank++;
      }
      after[v] = a;
    }
    return dedup(edges);
  }

  private static List<Edge> dedup(List<Edge> edges) {
    return new ArrayList<>(new LinkedHashSet<>(edges));
  }

  /**
   * For every op, the ops that must run before it because both access one variable (a
   * {@link ScheduleGraph} hazard) and that no path of the graph already puts before it; only
   * pairs with an op that is not memory-relevant unless {@code allPairs}. Paths are found with
   * bit sets over a topological order, 64 sources at a time.
   */
  private static int[][] unorderedHazards(ScheduleGraph sg, boolean[] relevant,
      boolean allPairs) {
    DataflowGraph g = sg.g;
    int n = sg.n;
    int[][] pairs = new int[n][];
    for (int v = 0; v < n; v++) {
      int[] hp = sg.hazardPreds[v];
      pairs[v] = allPairs || !relevant[v] ? hp
          : Arrays.stream(hp).filter(h -> !relevant[h]).toArray();
    }
    int[] sourceIndex = new int[n];
    Arrays.fill(sourceIndex, -1);
    List<Integer> sources = new ArrayList<>();
    for (int v = 0; v < n; v++) {
      for (int h : pairs[v]) {
        if (sourceIndex[h] < 0) {
          sourceIndex[h] = 0;
          sources.add(h);
        }
      }
    }
    sources.sort(null);
    for (int i = 0; i < sources.size(); i++) {
      sourceIndex[sources.get(i)] = i;
    }
    boolean[][] implied = new boolean[n][];
    for (int v = 0; v < n; v++) {
      implied[v] = new boolean[pairs[v].length];
    }
    int[] topo = g.topologicalOrder();
    long[] reach = new long[n];
    for (int chunk = 0; chunk < sources.size(); chunk += 64) {
      Arrays.fill(reach, 0L);
      for (int v : topo) {
        long r = 0;
        for (int i = 0, np = g.predecessorCount(v); i < np; i++) {
          r |= reach[g.predecessor(v, i)];
        }
        int si = sourceIndex[v];
        if (si >= chunk && si < chunk + 64) {
          r |= 1L << (si - chunk);
        }
        reach[v] = r;
      }
      for (int v = 0; v < n; v++) {
        int[] hp = pairs[v];
        for (int k = 0; k < hp.length; k++) {
          int si = sourceIndex[hp[k]];
          if (si >= chunk && si < chunk + 64 && (reach[v] & (1L << (si - chunk))) != 0) {
            implied[v][k] = true;
          }
        }
      }
    }
    int[][] out = new int[n][];
    for (int v = 0; v < n; v++) {
      int[] hp = pairs[v];
      int[] keep = new int[hp.length];
      int k = 0;
      for (int i = 0; i < hp.length; i++) {
        if (!implied[v][i]) {
          keep[k++] = hp[i];
        }
      }
      out[v] = Arrays.copyOf(keep, k);
    }
    return out;
  }

  /** Memory-relevant ops and accessors of updated variables, minus ops grappler folds. */
  private static boolean[] relevant(ScheduleGraph sg) {
    DataflowGraph g = sg.g;
    boolean[] r = new boolean[sg.n];
    for (int v = 0; v < sg.n; v++) {
      if (sg.hazardPreds[v].length > 0) {
        r[v] = true;
        for (int p : sg.hazardPreds[v]) {
          r[p] = true;
        }
      }
    }
    for (int v = 0; v < sg.n; v++) {
      Op op = g.op(v);
      if (sg.foldable[v]) {
        r[v] = false;
        continue;
      }
      if (sg.alloc[v] > 0) {
        r[v] = true;
      } else if (!OpTypes.SHAPE_ONLY.contains(op.type())) {
        for (TensorId t : op.inputs()) {
          if (sg.transientOutput(t) && g.tensor(t).bytes() > 0) {
            r[v] = true;
            break;
          }
        }
      }
    }
    return r;
  }
}
