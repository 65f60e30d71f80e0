package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.plan.HybridCandidate.Kind;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The decisions of one {@link HybridPlanner} search: its candidates, the option each has chosen,
 * and which producers are recomputed (kept in step with the choices by {@link #set} and
 * {@link #undo}).
 */
final class HybridState {
  private final DataflowGraph g;
  final List<HybridCandidate> candidates = new ArrayList<>();
  private final Map<TensorId, HybridCandidate> byTensor = new HashMap<>();
  private final boolean[] recomputed;

  HybridState(DataflowGraph g) {
    this.g = g;
    this.recomputed = new boolean[g.size()];
  }

  /** Adds the candidates (in discovery order). */
  void addAll(List<HybridCandidate> cs) {
    for (HybridCandidate c : cs) {
      candidates.add(c);
      byTensor.put(c.tid, c);
    }
  }

  /** The candidate of tensor {@code t}, or null. */
  HybridCandidate of(TensorId t) {
    return byTensor.get(t);
  }

  /** Chooses option {@code k} of {@code c} (-1: keep the tensor). */
  void set(HybridCandidate c, int k) {
    undo(c);
    c.chosen = k;
    if (c.chose(Kind.RECOMPUTE)) {
      recomputed[c.tid.op()] = true;
    }
  }

  /** Keeps {@code c}'s tensor again. */
  void undo(HybridCandidate c) {
    if (c.chose(Kind.RECOMPUTE)) {
      boolean other = false;
      for (HybridCandidate d : candidates) {
        other |= d != c && d.tid.op() == c.tid.op() && d.chose(Kind.RECOMPUTE);
      }
      recomputed[c.tid.op()] = other;
    }
    c.chosen = -1;
  }

  /**
   * True when op {@code v} reads or is read by a recomputed op, itself not recomputed (another
   * output of the same op shares its clone).
   */
  boolean nextToRecomputed(int v) {
    if (recomputed[v]) {
      return false;
    }
    for (TensorId in : g.op(v).inputs()) {
      if (recomputed[in.op()]) {
        return true;
      }
    }
    for (int s : g.successors(v)) {
      if (recomputed[s]) {
        return true;
      }
    }
    return false;
  }

  /** The decided candidates (only the swapped ones if asked), most expensive option first. */
  List<HybridCandidate> chosenMostExpensiveFirst(boolean swapsOnly) {
    List<HybridCandidate> out = new ArrayList<>();
    for (HybridCandidate c : candidates) {
      if (c.chosen >= 0 && (!swapsOnly || c.option().kind() == Kind.SWAP)) {
        out.add(c);
      }
    }
    out.sort(Comparator.comparingDouble((HybridCandidate c) -> -c.option().costUs())
        .thenComparingInt(c -> c.tid.op()));
    return out;
  }
}
