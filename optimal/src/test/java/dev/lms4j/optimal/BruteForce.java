package dev.lms4j.optimal;

import java.util.List;

/**
 * Exhaustive search of an {@link OptimalPlanner.Problem}: every in-memory pattern of every
 * movable tensor over its non-forced stages; each return to memory is paid by a recomputation
 * (inputs in memory at that stage) or a swap-in (plus one swap-out per tensor), the cheaper.
 */
final class BruteForce {
  private BruteForce() {}

  static double minStepMs(OptimalPlanner.Problem p) {
    List<OptimalPlanner.Item> items = p.items();
    int n = items.size();
    boolean[][] s = new boolean[n][];
    int[][] free = new int[n][];
    int bits = 0;
    for (int i = 0; i < n; i++) {
      OptimalPlanner.Item it = items.get(i);
      int len = it.last() - it.produced() + 1;
      s[i] = new boolean[len];
      java.util.Arrays.fill(s[i], true);
      boolean[] forced = new boolean[len];
      forced[0] = true;
      for (int k : it.reads()) {
        forced[k - it.produced()] = true;
      }
      int c = 0;
      int[] f = new int[len];
      if (it.swappable() || it.recomputable()) {
        for (int d = 0; d < len; d++) {
          if (!forced[d]) {
            f[c++] = d;
          }
        }
      }
      free[i] = java.util.Arrays.copyOf(f, c);
      bits += c;
    }
    if (bits > 24) {
      throw new IllegalArgumentException("too large for brute force: " + bits + " bits");
    }
    double best = Double.POSITIVE_INFINITY;
    for (long mask = 0; mask < (1L << bits); mask++) {
      int b = 0;
      for (int i = 0; i < n; i++) {
        for (int d : free[i]) {
          s[i][d] = ((mask >> b++) & 1) == 0;
        }
      }
      if (!fits(p, s)) {
        continue;
      }
      double cost = 0;
      for (int i = 0; i < n && cost < best; i++) {
        cost += cost(p, s, i);
      }
      best = Math.min(best, cost);
    }
    return best == Double.POSITIVE_INFINITY ? best : p.baseStepMs() + best / 1000;
  }

  private static boolean fits(OptimalPlanner.Problem p, boolean[][] s) {
    long[] mem = new long[p.stages()];
    for (int i = 0; i < s.length; i++) {
      OptimalPlanner.Item it = p.items().get(i);
      for (int d = 0; d < s[i].length; d++) {
        if (s[i][d]) {
          mem[it.produced() + d] += it.bytes();
        }
      }
    }
    for (int k = 0; k < mem.length; k++) {
      if (p.residentBytes() + mem[k] + p.scratch()[k] > p.availableBytes()) {
        return false;
      }
    }
    return true;
  }

  /** Microseconds tensor {@code i}'s pattern costs (rounded as the solver's coefficients). */
  private static double cost(OptimalPlanner.Problem p, boolean[][] s, int i) {
    OptimalPlanner.Item it = p.items().get(i);
    double rec = Math.round(it.recomputeUs() * 1000) / 1000.0;
    double x = Math.round(it.transferUs() * 1000) / 1000.0;
    java.util.List<Boolean> reloads = new java.util.ArrayList<>();
    boolean any = false;
    for (int d = 1; d < s[i].length; d++) {
      if (!s[i][d] || s[i][d - 1]) {
        continue;
      }
      any = true;
      int k = it.produced() + d;
      boolean canRec = it.recomputable();
      for (int j : it.inputs()) {
        OptimalPlanner.Item in = p.items().get(j);
        canRec &= k >= in.produced() && k <= in.last() && s[j][k - in.produced()];
      }
      reloads.add(canRec);
    }
    if (!any) {
      return 0;
    }
    // choose which reloads recompute: all (no swap-out), or any subset with swap-ins for the rest
    int m = reloads.size();
    double best = Double.POSITIVE_INFINITY;
    for (int sub = 0; sub < (1 << m); sub++) {
      int recs = Integer.bitCount(sub);
      if (p.onceRecomputed() && recs > 1) {
        continue;
      }
      double c = 0;
      boolean ok = true;
      for (int j = 0; j < m; j++) {
        if ((sub >> j & 1) == 1) {
          ok &= reloads.get(j);
          c += rec;
        } else {
          ok &= it.swappable();
          c += x;
        }
      }
      if (recs < m) {
        c += x;
      }
      if (ok) {
        best = Math.min(best, c);
      }
    }
    return best;
  }
}
