package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.plan.HybridCandidate.Kind;
import dev.lms4j.core.plan.HybridEvaluator.Sim;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One start of {@link HybridPlanner}'s search. Among the undecided candidates alive at the
 * simulated peak it takes the cheapest per byte until their bytes cover the excess over the
 * budget, simulates, keeps the batch when the peak went down, else retries its first candidate
 * alone and then moves that candidate to its next option. Once the plan fits,
 * {@link HybridRefinements} turns swaps into recomputation, undoes decisions the plan does not
 * need and (on small graphs) searches locally for a faster step.
 */
final class HybridSearch {
  private static final Logger LOG = LoggerFactory.getLogger(HybridPlanner.class);

  /** Graphs up to this many ops get exhaustive upgrade and prune passes. */
  static final int SMALL = 2000;

  private final DataflowGraph g;
  private final HybridPlanner.Options o;
  private final TensorPolicy policy;
  private final long available;
  private final boolean swapFirst;
  private final HybridState state;
  private final int[] pos;
  private final HybridEvaluator eval;

  /**
   * @param swapFirst when set, swap options are tried before recomputation wherever a swap is
   *                  possible (the second start)
   */
  HybridSearch(DataflowGraph g, HybridPlanner.Options o, TensorPolicy policy, boolean swapFirst) {
    this.g = g;
    this.o = o;
    this.policy = policy;
    this.swapFirst = swapFirst;
    this.available = (long) (o.budgetBytes() * o.memRatio());
    this.state = new HybridState(g);
    this.pos = new int[g.size()];
    this.eval = new HybridEvaluator(g, state, policy, o.tier(), pos);
  }

  HybridPlanner.Result run() {
    long t0 = System.nanoTime();
    CostModel cm = o.costModel();
    double base = cm.computeMs(g);
    Sim before = eval.simulate();
    if (before.peak() <= available) {
      return new HybridPlanner.Result(SwapPlan.empty(HybridEvaluator.params(o.tier())),
          RecomputePlan.empty(), false, before.peak(), before.peak(), base, base,
          eval.simulations());
    }
    long floor = LowerBound.of(g);
    if (floor > available) {
      throw impossible(floor, "resident tensors plus the largest op's working set need "
          + mib(floor) + " MiB");
    }
    state.addAll(HybridCandidates.find(g, o, policy, pos));
    Sim cur = descend(eval.simulate());
    if (cur.peak() > available) {
      if (LOG.isDebugEnabled()) {
        String peak;
        try {
          peak = eval.describePeak(12);
        } catch (RuntimeException e) {
          // a debug line never stops planning
          peak = "(not described: " + e.getMessage() + ")";
        }
        LOG.debug("[LMS][0] hybrid search gave up after {} simulations: {}",
            eval.simulations(), peak);
      }
      long best = Math.max(cur.peak(), floor);
      throw impossible(best, "the lowest simulated peak the hybrid planner reached was "
          + mib(cur.peak()) + " MiB");
    }
    HybridRefinements ref = new HybridRefinements(g, o, available, state, eval);
    cur = ref.upgrade(cur);
    cur = ref.prune(cur);
    if (g.size() <= SMALL) {
      cur = ref.improve(cur);
    }
    SwapPlan sp = cur.swaps();
    RecomputePlan rp = cur.recompute();
    double step = PlanCosts.stepMs(cm, g, sp, rp);
    LOG.info("[LMS][0] Hybrid plan: {} swapped tensors ({} MiB), {} recomputed ops in {} groups;"
        + " predicted peak {} MiB -> {} MiB, step {} ms -> {} ms ({} simulations, {} ms)",
        sp.swapOuts().size(), mib(sp.swapOutBytes()), rp.clonedOps(), rp.groups().size(),
        mib(before.peak()), mib(cur.peak()), String.format("%.1f", base),
        String.format("%.1f", step), eval.simulations(), (System.nanoTime() - t0) / 1_000_000);
    LOG.debug("[LMS][0] hybrid search: {} of {} simulations were plans already simulated",
        eval.repeats(), eval.simulations());
    return new HybridPlanner.Result(sp, rp, true, before.peak(), cur.peak(), base, step,
        eval.simulations());
  }

  /** The main loop: decides candidates at the peak until the plan fits or nothing helps. */
  private Sim descend(Sim cur) {
    boolean single = false;
    while (cur.peak() > available && eval.simulations() < o.maxSimulations()) {
      List<HybridCandidate> live = new ArrayList<>();
      for (TensorId t : cur.liveAtPeak()) {
        HybridCandidate c = state.of(t);
        if (c != null && c.chosen < 0 && c.next < c.options.size()) {
          live.add(c);
        }
      }
      if (live.isEmpty()) {
        break;
      }
      live.sort(Comparator.comparingDouble(HybridCandidate::bestCostPerByte)
          .thenComparingInt(c -> c.tid.op()).thenComparingInt(c -> c.tid.output()));
      List<HybridCandidate> batch = new ArrayList<>();
      long covered = 0;
      // first pass: each candidate's cheapest option when it can take it; second pass: the
      // ones whose cheapest option was a recomputation next to another, with their next option
      for (int pass = 0; pass < 2; pass++) {
        for (HybridCandidate c : live) {
          if (covered >= cur.peak() - available || (single && !batch.isEmpty())) {
            break;
          }
          if (c.chosen >= 0) {
            continue;
          }
          int pick = pick(c);
          if (pick < 0 || (pass == 0 && !swapFirst && pick != c.next)) {
            continue;
          }
          state.set(c, pick);
          batch.add(c);
          covered += c.tensor.bytes();
        }
      }
      if (batch.isEmpty()) {
        live.get(0).next++;
        continue;
      }
      Sim s = eval.simulate();
      if (s != null && s.peak() < cur.peak()) {
        cur = s;
        single = false;
        continue;
      }
      for (HybridCandidate c : batch) {
        state.undo(c);
      }
      if (batch.size() > 1) {
        single = true;
      } else {
        batch.get(0).next++;
        single = false;
      }
    }
    return cur;
  }

  /**
   * The option to try for {@code c}: its next one, or when that recomputes an op next to one
   * already recomputed (a clone would keep the other's original alive, or a merged group would
   * hold all clones at once), its next swap option; -1 when there is none.
   */
  private int pick(HybridCandidate c) {
    int best = -1;
    double bestUs = Double.POSITIVE_INFINITY;
    boolean canSwap = false;
    for (int k = c.next; k < c.options.size(); k++) {
      canSwap |= c.options.get(k).kind() == Kind.SWAP;
    }
    for (int k = c.next; k < c.options.size(); k++) {
      if (c.options.get(k).kind() == Kind.RECOMPUTE
          && ((swapFirst && canSwap) || state.nextToRecomputed(c.tid.op()))) {
        continue;
      }
      double us = c.options.get(k).costUs();
      if (us < bestUs) {
        bestUs = us;
        best = k;
      }
    }
    return best;
  }

  private PlanningException impossible(long peak, String why) {
    long need = (long) Math.ceil(peak / o.memRatio());
    return new PlanningException("A budget of " + mib(o.budgetBytes()) + " MiB cannot work with "
        + (o.swap() && o.recompute() ? "swapping and recomputation" : o.swap() ? "swapping"
        : "recomputation") + ": " + why + ", so the smallest budget that could work is about "
        + ((need + (1 << 20) - 1) >> 20) + " MiB (at memory ratio " + o.memRatio() + ").", need);
  }

  private static long mib(long b) {
    return b >> 20;
  }
}
