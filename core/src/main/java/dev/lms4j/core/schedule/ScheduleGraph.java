package dev.lms4j.core.schedule;

import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * What the schedulers and {@link ScheduleEdges} share: the graph's dependencies plus the order of
 * conflicting variable accesses, and the memory facts of {@link MemorySimulator} per op.
 *
 * <p><b>Variable hazards.</b> A variable read and an update of the same variable (an
 * {@code ApplyGradientDescent} and the gradient {@code MatMul} that reads the weight) are not
 * ordered by any edge, yet their order changes the numbers. TensorFlow runs them in its own
 * order, which the simulator models as the levelled schedule; every scheduler here keeps that
 * order, so a reordered schedule computes exactly what the original did. Accessors of a variable
 * are its direct readers and readers through {@code Identity} chains (a ref's {@code Identity}
 * aliases the variable's buffer), shape-only readers aside; writers are the {@code Assign*},
 * {@code Apply*}, {@code ResourceApply*}, {@code *Scatter*} and {@code CountUpTo} accessors.
 */
final class ScheduleGraph {
  final DataflowGraph g;
  final int n;
  /** Distinct predecessors (data, control, hazard), ascending. */
  final int[][] preds;
  /** Distinct successors (data, control, hazard), ascending. */
  final int[][] succs;
  /** Hazard predecessors only, ascending (a subset of {@link #preds}). */
  final int[][] hazardPreds;
  /** Position of each op in the levelled schedule. */
  final int[] levelRank;
  /** The levelled schedule. */
  final int[] levelled;
  /** Bytes of transient outputs an op allocates when it runs (0 for pinned ops). */
  final long[] alloc;
  /** Ops grappler folds into constants (computed from constants and static shapes only). */
  final boolean[] foldable;

  private ScheduleGraph(DataflowGraph g) {
    this.g = g;
    this.n = g.size();
    Levels lv = Levels.of(g);
    levelled = lv.schedule();
    levelRank = new int[n];
    for (int i = 0; i < n; i++) {
      levelRank[levelled[i]] = i;
    }
    alloc = new long[n];
    for (Op op : g.ops()) {
      if (!MemorySimulator.isPinned(op)) {
        for (Tensor t : op.outputs()) {
          if (!t.persistent()) {
            alloc[op.id()] += t.bytes();
          }
        }
      }
    }
    foldable = g.constantFoldable();
    hazardPreds = hazards(g, levelRank);
    preds = new int[n][];
    int[] succCount = new int[n];
    for (int v = 0; v < n; v++) {
      preds[v] = hazardPreds[v].length == 0 ? g.predecessors(v)
          : union(g.predecessors(v), hazardPreds[v]);
      for (int p : preds[v]) {
        succCount[p]++;
      }
    }
    succs = new int[n][];
    for (int v = 0; v < n; v++) {
      succs[v] = new int[succCount[v]];
      succCount[v] = 0;
    }
    for (int v = 0; v < n; v++) { // v ascending: successor lists come out ascending
      for (int p : preds[v]) {
        succs[p][succCount[p]++] = v;
      }
    }
  }

  static ScheduleGraph of(DataflowGraph g) {
    return new ScheduleGraph(g);
  }

  /** True when the op's outputs live in transient device memory (the simulator allocates them). */
  boolean transientOutput(TensorId t) {
    return !MemorySimulator.isPinned(g.op(t.op())) && !g.tensor(t).persistent();
  }

  /**
   * Checks that {@code order} is a permutation of the ops that respects every dependency and
   * hazard; throws {@link IllegalArgumentException} naming the first violation.
   */
  int[] positions(int[] order) {
    if (order.length != n) {
      throw new IllegalArgumentException("schedule has " + order.length + " ops, graph " + n);
    }
    int[] pos = new int[n];
    Arrays.fill(pos, -1);
    for (int i = 0; i < n; i++) {
      int v = order[i];
      if (v < 0 || v >= n || pos[v] >= 0) {
        throw new IllegalArgumentException("schedule is not a permutation of the ops (op id "
            + v + " at position " + i + ")");
      }
      pos[v] = i;
    }
    for (int v = 0; v < n; v++) {
      for (int p : preds[v]) {
        if (pos[p] > pos[v]) {
          boolean hazard = Arrays.binarySearch(hazardPreds[v], p) >= 0;
          throw new IllegalArgumentException("schedule runs " + g.op(v).name() + " before "
              + g.op(p).name() + (hazard ? " (both access one variable; their order must stay"
              + " as TensorFlow runs it)" : ""));
        }
      }
    }
    return pos;
  }

  private static int[] union(int[] a, int[] b) {
    int[] r = new int[a.length + b.length];
    int i = 0;
    int j = 0;
    int k = 0;
    while (i < a.length || j < b.length) {
      int x = j >= b.length || (i < a.length && a[i] <= b[j]) ? a[i++] : b[j++];
      if (k == 0 || r[k - 1] != x) {
        r[k++] = x;
      }
    }
    return Arrays.copyOf(r, k);
  }

  private static boolean writes(String type) {
    return type.startsWith("Assign") || type.startsWith("Apply")
        || type.startsWith("ResourceApply") || type.startsWith("SparseApply")
        || type.startsWith("ResourceSparseApply") || type.contains("Scatter")
        || type.equals("CountUpTo");
  }

  /** Hazard predecessors of every op: accessors of one variable keep their levelled order. */
  private static int[][] hazards(DataflowGraph g, int[] rank) {
    int n = g.size();
    List<List<Integer>> extra = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      extra.add(null);
    }
    int[] mark = new int[n];
    Arrays.fill(mark, -1);
    for (Op var : g.ops()) {
      if (!OpTypes.VARIABLES.contains(var.type())) {
        continue;
      }
      List<Integer> accessors = new ArrayList<>();
      ArrayDequeInt todo = new ArrayDequeInt();
      todo.push(var.id());
      while (!todo.isEmpty()) {
        int a = todo.pop();
        for (int o = 0; o < g.op(a).outputs().size(); o++) {
          for (int c : g.consumers(new TensorId(a, o))) {
            if (mark[c] != var.id() && !OpTypes.SHAPE_ONLY.contains(g.op(c).type())) {
              mark[c] = var.id();
              accessors.add(c);
              String t = g.op(c).type();
              if (t.equals("Identity") || t.equals("RefIdentity")) {
                todo.push(c);
              }
            }
          }
        }
      }
      List<Integer> writers = accessors.stream().filter(a -> writes(g.op(a).type())).toList();
      if (writers.isEmpty()) {
        continue;
      }
      for (int w : writers) {
        for (int a : accessors) {
          if (a == w) {
            continue;
          }
          int from = rank[a] < rank[w] ? a : w;
          int to = from == a ? w : a;
          if (extra.get(to) == null) {
            extra.set(to, new ArrayList<>());
          }
          extra.get(to).add(from);
        }
      }
    }
    int[][] out = new int[n][];
    for (int v = 0; v < n; v++) {
      List<Integer> e = extra.get(v);
      out[v] = e == null ? new int[0] : e.stream().mapToInt(Integer::intValue).sorted().distinct()
          .toArray();
    }
    return out;
  }

  /** A growable int stack. */
  private static final class ArrayDequeInt {
    private int[] a = new int[8];
    private int size;

    void push(int v) {
      if (size == a.length) {
        a = Arrays.copyOf(a, size * 2);
      }
      a[size++] = v;
    }

    int pop() {
      return a[--size];
    }

    boolean isEmpty() {
      return size == 0;
    }
  }
}
