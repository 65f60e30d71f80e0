package dev.lms4j.core.plan;

import java.util.List;

/**
 * What to swap, where, and which control edges order it. Names refer to ops of the graph the
 * plan was made for; inserted ops have names under {@link dev.lms4j.core.graph.OpTypes#LMS_PREFIX}.
 *
 * @param params        the parameters the plan was made with (auto-tuned values filled in)
 * @param swapOuts      one entry per swapped tensor
 * @param controlEdges  extra control edges between existing ops (serialization)
 */
public record SwapPlan(SwapParams params, List<SwapOut> swapOuts, List<ControlEdge> controlEdges) {
  public SwapPlan {
    swapOuts = List.copyOf(swapOuts);
    controlEdges = List.copyOf(controlEdges);
  }

  /** A plan that changes nothing. */
  public static SwapPlan empty(SwapParams params) {
    return new SwapPlan(params, List.of(), List.of());
  }

  /** True when the plan inserts nothing and adds no edge. */
  public boolean isEmpty() {
    return swapOuts.isEmpty() && controlEdges.isEmpty();
  }

  /** Number of swap-in ops. */
  public int swapInCount() {
    return swapOuts.stream().mapToInt(s -> s.swapIns().size()).sum();
  }

  /** Bytes moved out per step. */
  public long swapOutBytes() {
    return swapOuts.stream().mapToLong(SwapOut::bytes).sum();
  }

  /** Bytes moved in per step. */
  public long swapInBytes() {
    return swapOuts.stream().mapToLong(s -> s.bytes() * s.swapIns().size()).sum();
  }

  /** Number of ops the rewrite adds to the graph model (swap-outs plus swap-ins). */
  public int addedOps() {
    return swapOuts.size() + swapInCount();
  }

  /**
   * A control edge {@code from -> to}.
   *
   * @param from op that must run first
   * @param to   op that waits
   */
  public record ControlEdge(String from, String to) {}

  /**
   * One swapped tensor.
   *
   * @param producer       producing op
   * @param output         output index
   * @param dtype          dtype of the tensor
   * @param bytes          size of the tensor
   * @param name           name of the swap-out op
   * @param swapIns        its swap-ins, one per group of consumers
   * @param syncConsumers  ops that wait for the swap-out (sync_mode 1 and 3)
   */
  public record SwapOut(String producer, int output, String dtype, long bytes, String name,
      List<SwapIn> swapIns, List<String> syncConsumers) {
    public SwapOut {
      swapIns = List.copyOf(swapIns);
      syncConsumers = List.copyOf(syncConsumers);
    }

    /** TensorFlow name of the swapped tensor. */
    public String tensorName() {
      return producer + ":" + output;
    }
  }

  /**
   * One swap-in.
   *
   * @param name       name of the swap-in op
   * @param consumers  ops re-pointed to read the swap-in instead of the original tensor
   * @param triggers   ops the swap-in waits for (control edges); empty means none was found
   */
  public record SwapIn(String name, List<String> consumers, List<String> triggers) {
    public SwapIn {
      consumers = List.copyOf(consumers);
      triggers = List.copyOf(triggers);
    }
  }
}
