package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link Rematerializer.Mode#PATH}: every eligible forward op on a path into the backward pass
 * is recomputed, then the articulation ops of those paths ({@link RematArticulation}) are kept
 * again (the longest prefix of their order that fits, then the rest chunk by chunk) while the
 * peak stays within the limit; when the paths alone do not fit, {@link RematStandard} goes on
 * from there.
 */
final class RematPath {
  private static final Logger LOG = LoggerFactory.getLogger(Rematerializer.class);

  private final RematSearch s;
  private final DataflowGraph g;

  RematPath(RematSearch s) {
    this.s = s;
    this.g = s.g;
  }

  RematEval run(RematEval base) {
    boolean[] inS = s.inS;
    long limit = s.limit;
    // ops on paths into the backward pass: read by it, or read by such an op
    int[] topo = g.topologicalOrder();
    for (int i = topo.length - 1; i >= 0; i--) {
      int v = topo[i];
      if (!s.eligible[v]) {
        continue;
      }
      boolean useful = false;
      for (int j = 0; j < g.op(v).outputs().size() && !useful; j++) {
        for (int c : g.consumers(new TensorId(v, j))) {
          Op co = g.op(c);
          if (inS[c] || (co.category() != OpCategory.FORWARD
              && !OpTypes.SHAPE_ONLY.contains(co.type()))) {
            useful = true;
            break;
          }
        }
      }
      inS[v] = useful;
    }
    List<Integer> all = new ArrayList<>();
    for (int v = 0; v < s.n; v++) {
      if (inS[v]) {
        all.add(v);
      }
    }
    if (all.isEmpty()) {
      return base;
    }
    RematEval cur = s.eval();
    s.decide("path", all, 0, cur.peak());
    if (!cur.betterThan(base) && cur.peak() > limit) {
      LOG.debug("whole paths peak at {} B, no lower than without recomputation", cur.peak());
    }
    List<Integer> arts = RematArticulation.order(g, inS, s.costUs, topo);
    // 1. the longest prefix of the articulation order to keep: prefixes of 1, 2, 4, ... ops
    //    (the spread order makes a prefix of k about every (m/k)-th op), then bisection
    //    between the longest that fits and the next one tried
    int m = arts.size();
    int fitK = -1;
    int failK = -1;
    RematEval fitEval = null;
    RematEval bestEval = cur;
    int bestK = 0;
    for (int k = 1; m > 0; k = Math.min(m, k * 2)) {
      RematEval e = undone(arts, k);
      if (e.peak() <= limit) {
        fitK = k;
        fitEval = e;
        failK = -1;
      } else if (fitK >= 0 && failK < 0) {
        failK = k;
      }
      if (e.betterThan(bestEval)) {
        bestEval = e;
        bestK = k;
      }
      if (k == m || !s.canSimulate()) {
        break;
      }
    }
    if (fitK >= 0 && failK > fitK) {
      int lo = fitK;
      int hi = failK;
      // to within 1/32 of the articulation ops: the rest is left to step 2
      int tolerance = Math.max(1, m / 32);
      while (hi - lo > tolerance && s.canSimulate()) {
        int mid = (lo + hi) >>> 1;
        RematEval e = undone(arts, mid);
        if (e.peak() <= limit) {
          lo = mid;
          fitEval = e;
        } else {
          hi = mid;
        }
      }
      fitK = lo;
    }
    int k = fitK >= 0 ? fitK : bestK;
    cur = fitK >= 0 ? fitEval : bestEval;
    setUndone(arts, k);
    if (k > 0) {
      s.decide("undo", arts.subList(0, k), 0, cur.peak());
    }
    // 2. the rest one chunk at a time (halving on failure), while the limit holds
    int idx = k;
    int chunk = Math.max(1, (m - idx) / 2);
    int tries = 0;
    while (cur.peak() <= limit && idx < m && tries++ < 8 && s.canSimulate()) {
      List<Integer> batch = arts.subList(idx, Math.min(m, idx + chunk));
      batch.forEach(v -> inS[v] = false);
      RematEval next = s.eval();
      if (next.peak() <= limit) {
        s.decide("undo", batch, 0, next.peak());
        cur = next;
        idx += batch.size();
      } else {
        batch.forEach(v -> inS[v] = true);
        if (chunk > 1) {
          chunk = (chunk + 1) / 2;
        } else {
          s.decide("keep-remat", batch, 0, next.peak());
          idx++;
        }
      }
    }
    if (cur.peak() > limit && s.canSimulate()) {
      // the paths and their checkpoints alone do not fit: recompute more, XLA's way
      s.note("standard", List.of(), cur.peak());
      cur = new RematStandard(s).run(cur);
    }
    if (cur.peak() > limit && base.peak() < cur.peak()) {
      Arrays.fill(inS, false);
      return base;
    }
    return cur;
  }

  /** Evaluates the set with the first {@code k} articulation ops kept (not recomputed). */
  private RematEval undone(List<Integer> arts, int k) {
    setUndone(arts, k);
    RematEval e = s.eval();
    setUndone(arts, 0);
    return e;
  }

  private void setUndone(List<Integer> arts, int k) {
    for (int i = 0; i < arts.size(); i++) {
      s.inS[arts.get(i)] = i >= k;
    }
  }
}
