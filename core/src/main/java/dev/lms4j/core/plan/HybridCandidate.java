package dev.lms4j.core.plan;

import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.List;

/**
 * A forward tensor the backward pass reads (or any tensor, for a swap across the longest
 * stretch nothing reads it: {@link #backward} are then the readers after that stretch), as
 * {@link HybridPlanner} sees it: the ways to free
 * it (each with its predicted added time), the option chosen (or none) and the next option the
 * search will try.
 */
final class HybridCandidate {
  /** How a candidate is freed. */
  enum Kind { SWAP, RECOMPUTE }

  /**
   * One way to free a candidate.
   *
   * @param kind      swap or recompute
   * @param costUs    predicted added time, microseconds
   * @param triggers  ops the swap-in or the clones wait for
   * @param consumers ids of the backward ops that read the swap-in or the clone, ascending
   */
  record Option(Kind kind, double costUs, List<String> triggers, List<Integer> consumers) {
    Option {
      triggers = List.copyOf(triggers);
      consumers = List.copyOf(consumers);
    }
  }

  final TensorId tid;
  final Tensor tensor;
  /** Backward readers (shape-only readers left out), ascending ids. */
  final List<Integer> backward;
  /** The backward reader scheduled first. */
  final int firstBackward;
  /** The options, cheapest first. */
  final List<Option> options = new ArrayList<>();
  /** Index of the chosen option, -1 while kept. */
  int chosen = -1;
  /** Index of the next option the main loop tries. */
  int next;

  HybridCandidate(TensorId tid, Tensor tensor, List<Integer> backward, int firstBackward) {
    this.tid = tid;
    this.tensor = tensor;
    this.backward = backward;
    this.firstBackward = firstBackward;
  }

  /** The chosen option (only when {@link #chosen} is set). */
  Option option() {
    return options.get(chosen);
  }

  /** True when an option is chosen and it is of kind {@code k}. */
  boolean chose(Kind k) {
    return chosen >= 0 && option().kind() == k;
  }

  /** Predicted microseconds per byte freed of the next option. */
  double bestCostPerByte() {
    return options.get(next).costUs() / Math.max(1, tensor.bytes());
  }
}
