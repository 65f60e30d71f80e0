package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.plan.HybridCandidate.Kind;
import dev.lms4j.core.plan.HybridCandidate.Option;
import dev.lms4j.core.plan.HybridEvaluator.Sim;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * What {@link HybridSearch} does once a plan fits: upgrade swaps to recomputation where that is
 * cheaper, undo the most expensive decisions the plan does not need, and on small graphs a local
 * search over single decisions and neighbouring pairs for a faster predicted step. Every step
 * keeps the plan within the budget.
 */
final class HybridRefinements {
  private final DataflowGraph g;
  private final HybridPlanner.Options o;
  private final long available;
  private final HybridState state;
  private final HybridEvaluator eval;

  HybridRefinements(DataflowGraph g, HybridPlanner.Options o, long available, HybridState state,
      HybridEvaluator eval) {
    this.g = g;
    this.o = o;
    this.available = available;
    this.state = state;
    this.eval = eval;
  }

  /**
   * Turns swaps into recomputations where that is predicted cheaper and the plan still fits,
   * most expensive swaps first; here a recomputed op may read another recomputed op (they
   * become one group whose clones read each other), which the main loop avoids.
   */
  Sim upgrade(Sim cur) {
    CostModel cm = o.costModel();
    List<HybridCandidate> swapped = state.chosenMostExpensiveFirst(true);
    int chunk = Math.max(1, swapped.size() / 32);
    int limit = small() ? Math.max(o.pruneLimit(), swapped.size()) : o.pruneLimit();
    int tries = 0;
    for (int from = 0; from < swapped.size() && tries < limit; from += chunk) {
      List<HybridCandidate> part = new ArrayList<>();
      List<Integer> was = new ArrayList<>();
      for (HybridCandidate c : swapped.subList(from, Math.min(swapped.size(), from + chunk))) {
        for (int k = 0; k < c.options.size(); k++) {
          Option op = c.options.get(k);
          if (op.kind() == Kind.RECOMPUTE && op.costUs() < c.option().costUs()) {
            part.add(c);
            was.add(c.chosen);
            state.set(c, k);
            break;
          }
        }
      }
      if (part.isEmpty()) {
        continue;
      }
      tries++;
      Sim s = eval.simulate();
      if (s != null && s.peak() <= available && (!small()
          || PlanCosts.stepMs(cm, g, s.swaps(), s.recompute())
              < PlanCosts.stepMs(cm, g, cur.swaps(), cur.recompute()))) {
        cur = s;
        continue;
      }
      for (int k = 0; k < part.size(); k++) {
        state.set(part.get(k), was.get(k));
      }
    }
    return cur;
  }

  /** Undoes the most expensive decisions while the plan still fits. */
  Sim prune(Sim cur) {
    List<HybridCandidate> chosen = state.chosenMostExpensiveFirst(false);
    // undo in chunks (1/32 of the decisions each) so that large graphs need few simulations;
    // small graphs (simulations are cheap) try every decision
    int chunk = Math.max(1, chosen.size() / 32);
    int limit = small() ? Math.max(o.pruneLimit(), chosen.size()) : o.pruneLimit();
    int tries = 0;
    for (int from = 0; from < chosen.size() && tries < limit; from += chunk) {
      tries++;
      List<HybridCandidate> part = chosen.subList(from, Math.min(chosen.size(), from + chunk));
      int[] was = new int[part.size()];
      for (int k = 0; k < was.length; k++) {
        was[k] = part.get(k).chosen;
        state.undo(part.get(k));
      }
      Sim s = eval.simulate();
      if (s != null && s.peak() <= available) {
        cur = s;
        continue;
      }
      for (int k = 0; k < was.length; k++) {
        state.set(part.get(k), was[k]);
      }
    }
    return cur;
  }

  /**
   * Local search on small graphs: for each decision, most expensive first, tries keeping the
   * tensor and each other option, and takes a change when the plan still fits and the cost
   * model predicts the whole step faster (this sees what per-candidate costs miss, such as the
   * extra swap-in a recompute clone needs when it reads a swapped tensor).
   */
  Sim improve(Sim cur) {
    CostModel cm = o.costModel();
    double[] best = {PlanCosts.stepMs(cm, g, cur.swaps(), cur.recompute())};
    Sim[] at = {cur};
    List<HybridCandidate> all = new ArrayList<>(state.candidates);
    all.sort(Comparator.comparingDouble(
            (HybridCandidate c) -> c.chosen < 0 ? 0 : -c.option().costUs())
        .thenComparingInt(c -> c.tid.op()));
    // pairs of neighbours (the producer of one reads the other): changes that only pay together
    List<HybridCandidate[]> pairs = new ArrayList<>();
    for (HybridCandidate d : all) {
      for (TensorId in : g.op(d.tid.op()).inputs()) {
        HybridCandidate c = state.of(in);
        if (c != null) {
          pairs.add(new HybridCandidate[] {c, d});
        }
      }
    }
    for (int round = 0; round < 3; round++) {
      boolean changed = false;
      for (HybridCandidate c : all) {
        changed |= tryAll(new HybridCandidate[] {c}, best, at);
      }
      for (HybridCandidate[] p : pairs) {
        if (eval.simulations() >= o.maxSimulations() * 8) {
          break;
        }
        changed |= tryAll(p, best, at);
      }
      if (!changed) {
        break;
      }
    }
    eval.simulate();
    return at[0];
  }

  /** Tries every combination of options (keep included) for {@code cs}; keeps the fastest. */
  private boolean tryAll(HybridCandidate[] cs, double[] best, Sim[] at) {
    CostModel cm = o.costModel();
    int[] was = new int[cs.length];
    for (int i = 0; i < cs.length; i++) {
      was[i] = cs[i].chosen;
    }
    int[] k = new int[cs.length];
    Arrays.fill(k, -1);
    boolean changed = false;
    while (true) {
      boolean same = true;
      for (int i = 0; i < cs.length; i++) {
        same &= k[i] == was[i];
      }
      if (!same) {
        for (int i = 0; i < cs.length; i++) {
          state.set(cs[i], k[i]);
        }
        Sim s = eval.simulate();
        double t = s != null && s.peak() <= available
            ? PlanCosts.stepMs(cm, g, s.swaps(), s.recompute()) : Double.POSITIVE_INFINITY;
        if (t < best[0] - 1e-9) {
          best[0] = t;
          at[0] = s;
          was = k.clone();
          changed = true;
        }
        for (int i = 0; i < cs.length; i++) {
          state.set(cs[i], was[i]);
        }
      }
      int i = 0;
      while (i < cs.length && ++k[i] >= cs[i].options.size()) {
        k[i] = -1;
        i++;
      }
      if (i == cs.length) {
        break;
      }
    }
    return changed;
  }

  private boolean small() {
    return g.size() <= HybridSearch.SMALL;
  }
}
