package dev.lms4j.core.plan;

/**
 * Union-find over ids in a parent array (path halving; the smaller id is the root). Start with
 * {@code parent[v] = v} for every id.
 */
public final class UnionFind {
  private UnionFind() {}

  /** The root of {@code v}'s set. */
  public static int find(int[] parent, int v) {
    while (parent[v] != v) {
      parent[v] = parent[parent[v]];
      v = parent[v];
    }
    return v;
  }

  /** Joins the sets of {@code a} and {@code b}. */
  public static void union(int[] parent, int a, int b) {
    int ra = find(parent, a);
    int rb = find(parent, b);
    if (ra != rb) {
      parent[Math.max(ra, rb)] = Math.min(ra, rb);
    }
  }
}
