package dev.lms4j.core.graph;

import dev.lms4j.core.graph.DataflowGraph;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * TFLMS's levelled topological sort: an op's level is one more than the highest level among its
 * predecessors (data and control), sources are at level 0. Ops at one level do not depend on
 * each other, so TensorFlow may run them in any order; the distance between a producer and a
 * consumer is the difference of their levels.
 *
 * <p>One exception to "as soon as possible": an op computed from constants alone that grappler
 * does not fold into a constant (a {@code RandomUniform} of a constant shape, as a dropout mask
 * is written where shapes are static, and what is computed from it only) sits one level before
 * its earliest successor instead of at the top of the graph. As soon as possible, every dropout
 * mask of an MLP was made at the start of the step and held through the whole forward pass (six
 * masks, 24 MiB of a 109 MiB step, kept alive by the order alone). Random ops keep their values:
 * each kernel draws from its own seeded generator, whenever it runs.
 *
 * <p>The schedule this class gives (level by level, ascending op id within a level) is the order
 * the simulator assumes TensorFlow runs the graph in.
 */
public final class Levels {
  private final int[] level;
  private final int[][] byLevel;

  private Levels(int[] level, int[][] byLevel) {
    this.level = level;
    this.byLevel = byLevel;
  }

  /** Computes the levels of a graph in O(ops + edges). */
  public static Levels of(DataflowGraph g) {
    int n = g.size();
    int[] level = new int[n];
    int max = 0;
    int[] topo = g.topologicalOrder();
    // ops computed from constants alone (see sinkConstantDerived), and whether one of them may
    // escape grappler's folding: where none can, nothing moves, and the rest is skipped
    boolean[] derived = new boolean[n];
    boolean unfolded = false;
    for (int v : topo) {
      int l = 0;
      int np = g.predecessorCount(v);
      boolean all = np > 0;
      for (int i = 0; i < np; i++) {
        int u = g.predecessor(v, i);
        l = Math.max(l, level[u] + 1);
        all = all && (derived[u] || OpTypes.CONSTANTS.contains(g.op(u).type()));
      }
      level[v] = l;
      max = Math.max(max, l);
      Op op = g.op(v);
      if (all && !OpTypes.isResident(op.type()) && !op.name().startsWith(OpTypes.LMS_PREFIX)) {
        derived[v] = true;
        unfolded |= (OpTypes.isRandomOrStateful(op.type()) || op.inputs().isEmpty())
            && !OpTypes.CONSTANTS.contains(op.type()) && !OpTypes.SHAPE_ONLY.contains(op.type());
      }
    }
    if (unfolded) {
      max = sinkConstantDerived(g, topo, derived, level, max);
    }
    int[] count = new int[n == 0 ? 0 : max + 1];
    for (int l : level) {
      count[l]++;
    }
    int[][] by = new int[count.length][];
    for (int l = 0; l < count.length; l++) {
      by[l] = new int[count[l]];
    }
    int[] fill = new int[count.length];
    for (int v = 0; v < n; v++) {
      by[level[v]][fill[level[v]]++] = v;
    }
    return new Levels(level, by);
  }

  /**
   * Moves each op computed from constants alone to one level before its earliest successor
   * (reverse topological order, so a chain of them moves as a whole; readers grappler folds, such
   * as a {@code Shape} of it, do not hold it up), then lets the ops placed right after them
   * follow: lms4j's own ops (a swap-out belongs right after its tensor), those folded readers and
   * whatever depends on those. Levels only grow and every op stays above its predecessors.
   * Called only where one of the {@code derived} ops may escape folding (a random or stateful
   * op, or one with no data input): otherwise every one of them is folded and nothing moves.
   *
   * @return the highest level
   */
  private static int sinkConstantDerived(DataflowGraph g, int[] topo, boolean[] derived,
      int[] level, int max) {
    // what grappler folds into constants (no random op upstream) is left where it is: it will
    // not run in the step, and moving it would only shuffle the levels planners count in
    boolean[] folded = g.constantFoldable();
    boolean any = false;
    for (int v : topo) {
      any |= derived[v] && !folded[v];
    }
    if (!any) {
      return max;
    }
    for (int k = topo.length - 1; k >= 0; k--) {
      int v = topo[k];
      if (!derived[v] || folded[v]) {
        continue;
      }
      int l = Integer.MAX_VALUE;
      for (int s : g.successors(v)) {
        // a shape read of it is folded too, and a swap-out of it follows it
        if (!folded[s] && !g.op(s).name().startsWith(OpTypes.LMS_PREFIX)) {
          l = Math.min(l, level[s] - 1);
        }
      }
      if (l != Integer.MAX_VALUE) {
        level[v] = Math.max(level[v], l);
      }
    }
    int top = 0;
    for (int v : topo) {
      for (int i = 0, np = g.predecessorCount(v); i < np; i++) {
        level[v] = Math.max(level[v], level[g.predecessor(v, i)] + 1);
      }
      top = Math.max(top, level[v]);
    }
    return top;
  }

  /** The level of an op. */
  public int level(int op) {
    return level[op];
  }

  /** Number of levels. */
  public int count() {
    return byLevel.length;
  }

  /** Ids of the ops at a level, ascending. */
  public int[] opsAt(int l) {
    return byLevel[l].clone();
  }

  /** The schedule: ops level by level, ascending id within a level. */
  public int[] schedule() {
    int[] s = new int[level.length];
    int k = 0;
    for (int[] ops : byLevel) {
      System.arraycopy(ops, 0, s, k, ops.length);
      k += ops.length;
    }
    return s;
  }

  /** Level index of every op (a copy). */
  public int[] asArray() {
    return Arrays.copyOf(level, level.length);
  }

  /** Levels with more than one op, as lists (for debugging output). */
  public List<int[]> wideLevels() {
    List<int[]> out = new ArrayList<>();
    for (int[] ops : byLevel) {
      if (ops.length > 1) {
        out.add(ops.clone());
      }
    }
    return out;
  }
}
