package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * {@link Rematerializer.Mode#STANDARD}, XLA's greedy: at the simulated peak, blocks of eligible
 * ops scored by bytes saved at the peak per microsecond of recompute time; the best blocks are
 * tried (several at once while their estimates do not cover the excess), kept when the
 * evaluation improves, else rejected; when no block helps the block size doubles up to the
 * options' maximum.
 */
final class RematStandard {
  /** Clones made by {@link RecomputeApplier} start with this. */
  static final String CLONE_PREFIX = OpTypes.LMS_PREFIX + "recompute/";

  private record Candidate(List<Integer> block, long saved, double score) {}

  private final RematSearch s;
  private final DataflowGraph g;

  RematStandard(RematSearch s) {
    this.s = s;
    this.g = s.g;
  }

  /** Recomputes blocks from {@code start} until the limit holds or nothing helps. */
  RematEval run(RematEval start) {
    RematEval cur = start;
    int blockLimit = s.o.blockSizeLimit();
    Set<List<Integer>> rejected = new HashSet<>();
    while (cur.peak() > s.limit && s.canSimulate()) {
      List<Candidate> cands = candidates(cur, blockLimit, rejected);
      if (cands.isEmpty()) {
        if (blockLimit >= s.o.maxBlockSize()) {
          break;
        }
        blockLimit = Math.min(s.o.maxBlockSize(), blockLimit * 2);
        s.note("grow-block", List.of("block size " + blockLimit), cur.peak());
        continue;
      }
      // several disjoint blocks at once while their estimates do not yet cover the excess
      long excess = cur.peak() - s.limit;
      boolean[] touched = new boolean[s.n];
      List<Candidate> batch = new ArrayList<>();
      long sum = 0;
      for (Candidate c : cands) {
        if (sum >= excess) {
          break;
        }
        if (touches(c.block(), touched)) {
          continue;
        }
        mark(c.block(), touched);
        batch.add(c);
        sum += c.saved();
      }
      batch.forEach(c -> c.block().forEach(v -> s.inS[v] = true));
      RematEval next = s.eval();
      if (batch.size() > 1 && !next.betterThan(cur)) {
        batch.forEach(c -> c.block().forEach(v -> s.inS[v] = false));
        batch = List.of(batch.get(0));
        batch.get(0).block().forEach(v -> s.inS[v] = true);
        next = s.eval();
      }
      if (next.betterThan(cur)) {
        for (Candidate c : batch) {
          s.decide("remat", c.block(), c.saved(), next.peak());
        }
        cur = next;
      } else {
        Candidate c = batch.get(0);
        c.block().forEach(v -> s.inS[v] = false);
        rejected.add(c.block());
        s.decide("reject", c.block(), c.saved(), next.peak());
      }
    }
    return cur;
  }

  private static boolean touches(List<Integer> block, boolean[] touched) {
    for (int v : block) {
      if (touched[v]) {
        return true;
      }
    }
    return false;
  }

  private void mark(List<Integer> block, boolean[] touched) {
    for (int v : block) {
      touched[v] = true;
      for (int p : g.predecessors(v)) {
        touched[p] = true;
      }
      for (int c : g.successors(v)) {
        touched[c] = true;
      }
    }
  }

  /** Candidate blocks at the current peak, best score first. */
  private List<Candidate> candidates(RematEval e, int blockLimit, Set<List<Integer>> rejected) {
    int p = e.prof.peakAt();
    List<Candidate> out = new ArrayList<>();
    if (p < 0) {
      return out;
    }
    for (int v = 0; v < s.n; v++) {
      if (!s.eligible[v] || s.inS[v] || e.pos[v] >= p) {
        continue;
      }
      Candidate best = null;
      List<Integer> block = new ArrayList<>();
      block.add(v);
      for (int k = 1; k <= blockLimit; k++) {
        if (k > 1 && !grow(e, block, p)) {
          break;
        }
        List<Integer> key = block.stream().sorted().toList();
        if (rejected.contains(key)) {
          continue;
        }
        long saved = 0;
        for (int m : block) {
          saved += savedAtPeak(e, m, p);
        }
        if (saved <= 0) {
          if (k == 1) {
            break; // v's own outputs save nothing at the peak
          }
          continue;
        }
        long est = saved - extended(e, block, p);
        double cost = 0;
        for (int m : block) {
          cost += s.costUs[m];
        }
        double score = est / Math.max(cost, 1e-3);
        if (est > 0 && (best == null || score > best.score())) {
          best = new Candidate(key, est, score);
        }
      }
      if (best != null) {
        out.add(best);
      }
    }
    out.sort(Comparator.comparingDouble(Candidate::score).reversed()
        .thenComparing(c -> c.block().get(0)));
    return out;
  }

  /** Adds to the block the latest producer of a member's input that is dead at the peak. */
  private boolean grow(RematEval e, List<Integer> block, int p) {
    int best = -1;
    for (int m : block) {
      for (TensorId in : g.op(m).inputs()) {
        int u = in.op();
        if (!s.eligible[u] || s.inS[u] || block.contains(u) || liveAt(e, in, p)) {
          continue;
        }
        if (best < 0 || e.pos[u] > e.pos[best]) {
          best = u;
        }
      }
    }
    if (best < 0) {
      return false;
    }
    block.add(best);
    return true;
  }

  /**
   * Bytes of {@code m}'s outputs that recomputing it frees at the peak: live there, read by
   * the backward pass (or a clone) only after it and by the forward pass only before it.
   */
  private long savedAtPeak(RematEval e, int m, int p) {
    long saved = 0;
    Op op = g.op(m);
    for (int i = 0; i < op.outputs().size(); i++) {
      Tensor t = op.output(i);
      if (t.persistent()) {
        continue;
      }
      int[] readers = e.rw.consumers(new TensorId(m, i));
      boolean late = false;
      boolean ok = true;
      for (int r : readers) {
        Op ro = e.rw.op(r);
        if (OpTypes.SHAPE_ONLY.contains(ro.type())) {
          continue;
        }
        boolean isLate = ro.category() != OpCategory.FORWARD
            || ro.name().startsWith(CLONE_PREFIX);
        if (isLate) {
          late = true;
          ok &= e.pos[r] > p;
        } else {
          ok &= e.pos[r] < p;
        }
      }
      if (late && ok) {
        saved += t.bytes();
      }
    }
    return saved;
  }

  /** Bytes of the block's outside inputs that are dead at the peak (the clones extend them). */
  private long extended(RematEval e, List<Integer> block, int p) {
    long b = 0;
    Set<TensorId> seen = new HashSet<>();
    for (int m : block) {
      for (TensorId in : g.op(m).inputs()) {
        Op u = g.op(in.op());
        if (block.contains(in.op()) || !seen.add(in) || s.inS[in.op()]
            || MemorySimulator.isPinned(u) || g.tensor(in).persistent()) {
          continue;
        }
        if (!liveAt(e, in, p)) {
          b += g.tensor(in).bytes();
        }
      }
    }
    return b;
  }

  /** True when tensor {@code t} is in memory while the op at position {@code p} runs. */
  private static boolean liveAt(RematEval e, TensorId t, int p) {
    if (e.pos[t.op()] > p) {
      return false;
    }
    int last = e.pos[t.op()];
    for (int r : e.rw.consumers(t)) {
      if (!OpTypes.SHAPE_ONLY.contains(e.rw.op(r).type())) {
        last = Math.max(last, e.pos[r]);
      }
    }
    return last >= p;
  }
}
