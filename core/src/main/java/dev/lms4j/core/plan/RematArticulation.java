package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * Articulation ops of a recomputed set, for {@link RematPath}: ops whose removal splits the set
 * (undirected data edges inside it), the checkpoints of Chen et al.
 */
final class RematArticulation {
  private RematArticulation() {}

  /**
   * The articulation ops of {@code in}, expensive ones first (by power-of-two buckets of
   * {@code costUs}), then spread evenly over the topological order {@code topo} (bit-reversed
   * rank), then by id.
   */
  static List<Integer> order(DataflowGraph g, boolean[] in, double[] costUs, int[] topo) {
    int n = g.size();
    boolean[] art = points(g, in);
    List<Integer> arts = new ArrayList<>();
    for (int v : topo) {
      if (art[v]) {
        arts.add(v);
      }
    }
    int m = arts.size();
    int bits = Math.max(1, 32 - Integer.numberOfLeadingZeros(Math.max(1, m - 1)));
    int[] spread = new int[n];
    for (int i = 0; i < m; i++) {
      spread[arts.get(i)] = Integer.reverse(i) >>> (32 - bits);
    }
    arts.sort(Comparator.<Integer>comparingInt(
            v -> -(int) Math.floor(Math.log(Math.max(1, costUs[v])) / Math.log(2)))
        .thenComparingInt(v -> spread[v]).thenComparingInt(v -> v));
    return arts;
  }

  /**
   * Articulation points of the undirected graph of data edges among the ops in {@code in}
   * (iterative Tarjan, one DFS tree per connected part).
   */
  static boolean[] points(DataflowGraph g, boolean[] in) {
    int n = g.size();
    int[][] adj = new int[n][];
    int[] deg = new int[n];
    List<int[]> edges = new ArrayList<>();
    for (int v = 0; v < n; v++) {
      if (!in[v]) {
        continue;
      }
      for (int u : g.predecessors(v)) {
        if (in[u] && isDataEdge(g, u, v)) {
          edges.add(new int[] {u, v});
          deg[u]++;
          deg[v]++;
        }
      }
    }
    for (int v = 0; v < n; v++) {
      adj[v] = new int[deg[v]];
      deg[v] = 0;
    }
    for (int[] e : edges) {
      adj[e[0]][deg[e[0]]++] = e[1];
      adj[e[1]][deg[e[1]]++] = e[0];
    }
    int[] disc = new int[n];
    int[] low = new int[n];
    int[] parent = new int[n];
    int[] next = new int[n];
    int[] children = new int[n];
    boolean[] art = new boolean[n];
    Arrays.fill(disc, -1);
    int time = 0;
    int[] stack = new int[n];
    for (int root = 0; root < n; root++) {
      if (!in[root] || disc[root] >= 0) {
        continue;
      }
      int sp = 0;
      stack[sp++] = root;
      parent[root] = -1;
      disc[root] = low[root] = time++;
      while (sp > 0) {
        int v = stack[sp - 1];
        if (next[v] < adj[v].length) {
          int w = adj[v][next[v]++];
          if (disc[w] < 0) {
            parent[w] = v;
            children[v]++;
            disc[w] = low[w] = time++;
            stack[sp++] = w;
          } else if (w != parent[v]) {
            low[v] = Math.min(low[v], disc[w]);
          }
        } else {
          sp--;
          int pv = parent[v];
          if (pv >= 0) {
            low[pv] = Math.min(low[pv], low[v]);
            if (parent[pv] >= 0 && low[v] >= disc[pv]) {
              art[pv] = true;
            }
          }
        }
      }
      art[root] = children[root] > 1;
    }
    return art;
  }

  private static boolean isDataEdge(DataflowGraph g, int u, int v) {
    for (TensorId t : g.op(v).inputs()) {
      if (t.op() == u) {
        return true;
      }
    }
    return false;
  }
}
