package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.Set;
import java.util.TreeSet;

/**
 * The recompute plan of a {@link RematSearch}'s current set, applied and simulated on the
 * levelled schedule; one simulator run.
 */
final class RematEval {
  final RecomputePlan plan;
  /** The graph with the plan applied. */
  final DataflowGraph rw;
  /** Schedule positions of {@link #rw}'s ops. */
  final int[] pos;
  final MemoryProfile prof;
  /** Bytes above the limit summed over the schedule. */
  final long area;

  RematEval(RematSearch s) {
    Set<String> names = new TreeSet<>();
    for (int v = 0; v < s.n; v++) {
      if (s.inS[v]) {
        names.add(s.g.op(v).name());
      }
    }
    plan = names.isEmpty() ? RecomputePlan.empty() : RecomputePlanner.manual(s.g, names);
    rw = RecomputeApplier.apply(s.g, plan);
    int[] order = Levels.of(rw).schedule();
    pos = new int[rw.size()];
    for (int i = 0; i < order.length; i++) {
      pos[order[i]] = i;
    }
    prof = MemorySimulator.simulate(rw, order);
    long a = 0;
    for (long t : prof.timeline()) {
      a += Math.max(0, t - s.limit);
    }
    area = a;
    s.sims++;
  }

  long peak() {
    return prof.peakBytes();
  }

  /** A lower peak, or the same peak with less excess over the step. */
  boolean betterThan(RematEval e) {
    return peak() < e.peak() || (peak() == e.peak() && area < e.area);
  }
}
