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
    for (int v : g.topologicalOrder()) {
      int l = 0;
      for (int i = 0, n2 = g.predecessorCount(v); i < n2; i++) {
        l = Math.max(l, level[g.predecessor(v, i)] + 1);
      }
      level[v] = l;
      max = Math.max(max, l);
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
