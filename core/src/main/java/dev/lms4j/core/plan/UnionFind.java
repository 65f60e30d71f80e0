package dev.lms4j.core.plan;

/** Union-find over op ids in a parent array (path halving; the smaller id is the root). */
final class UnionFind {
  private UnionFind() {}

  static int find(int[] parent, int v) {
    while (parent[v] != v) {
      parent[v] = parent[parent[v]];
      v = parent[v];
    }
    return v;
  }

  static void union(int[] parent, int a, int b) {
    int ra = find(parent, a);
    int rb = find(parent, b);
    if (ra != rb) {
      parent[Math.max(ra, rb)] = Math.min(ra, rb);
    }
  }
}
