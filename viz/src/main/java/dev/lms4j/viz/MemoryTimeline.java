package dev.lms4j.viz;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanApplier;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.graph.Levels;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Simulated device memory over one training step, before and after LMS, with the positions in
 * the rewritten schedule where swap-outs, swap-ins and recomputed ops run. Both profiles come
 * from {@link MemorySimulator} on TFLMS's levelled schedule, as the planners predict peaks: the
 * rewritten graph is the original with the recompute plan applied first, then the swap plan
 * (the order {@code Lms}'s auto strategy plans in), so {@code after().peakBytes()} is the
 * predicted peak after LMS.
 *
 * <pre>{@code
 * MemoryTimeline t = MemoryTimeline.of(result.model(), result.plan(), result.recompute());
 * long saved = t.before().peakBytes() - t.after().peakBytes();
 * }</pre>
 *
 * @param before     the original graph's profile
 * @param after      the rewritten graph's profile (the same as {@code before} without a plan)
 * @param rewritten  false when the plans change nothing
 * @param swapOuts   positions in {@code after}'s order where swap-outs run
 * @param swapIns    positions in {@code after}'s order where swap-ins run
 * @param recomputes positions in {@code after}'s order where recomputed (cloned) ops run
 */
public record MemoryTimeline(MemoryProfile before, MemoryProfile after, boolean rewritten,
    int[] swapOuts, int[] swapIns, int[] recomputes) {

  /** Name prefix of the clones a recompute plan adds. */
  private static final String RECOMPUTE_PREFIX = recomputePrefix();

  public MemoryTimeline {
    Objects.requireNonNull(before);
    Objects.requireNonNull(after);
    swapOuts = swapOuts.clone();
    swapIns = swapIns.clone();
    recomputes = recomputes.clone();
  }

  /** The original graph alone (no plan): {@code after} is {@code before}. */
  public static MemoryTimeline of(DataflowGraph model) {
    return of(model, null, null);
  }

  /**
   * The timeline of {@code model} and of {@code model} rewritten with the plans.
   *
   * @param swap      the swap plan, or null / empty
   * @param recompute the recompute plan, or null / empty
   */
  public static MemoryTimeline of(DataflowGraph model, SwapPlan swap, RecomputePlan recompute) {
    return of(model, model, swap, recompute);
  }

  /**
   * The timeline of {@code original}, and of {@code planned} rewritten with the plans, for a
   * plan made on a graph that an earlier step had already changed (e.g. a scheduling step's
   * control edges and AddN chains): the curve before LMS is then the original graph's.
   *
   * @param original  the graph as it was given
   * @param planned   the graph the plans were made on
   * @param swap      the swap plan, or null / empty
   * @param recompute the recompute plan, or null / empty
   */
  public static MemoryTimeline of(DataflowGraph original, DataflowGraph planned, SwapPlan swap,
      RecomputePlan recompute) {
    MemoryProfile before = MemorySimulator.simulate(original, Levels.of(original).schedule());
    boolean none = (swap == null || swap.isEmpty()) && (recompute == null || recompute.isEmpty());
    if (none && original == planned) {
      return new MemoryTimeline(before, before, false, new int[0], new int[0], new int[0]);
    }
    DataflowGraph r = planned;
    if (recompute != null && !recompute.isEmpty()) {
      r = RecomputeApplier.apply(r, recompute);
    }
    if (swap != null && !swap.isEmpty()) {
      r = PlanApplier.apply(r, swap);
    }
    MemoryProfile after = MemorySimulator.simulate(r, Levels.of(r).schedule());
    List<Integer> outs = new ArrayList<>();
    List<Integer> ins = new ArrayList<>();
    List<Integer> rec = new ArrayList<>();
    int[] order = after.order();
    for (int pos = 0; pos < order.length; pos++) {
      Op op = r.op(order[pos]);
      if (op.type().equals(OpTypes.SWAP_OUT)) {
        outs.add(pos);
      } else if (op.type().equals(OpTypes.SWAP_IN)) {
        ins.add(pos);
      } else if (op.name().startsWith(RECOMPUTE_PREFIX)) {
        rec.add(pos);
      }
    }
    return new MemoryTimeline(before, after, true, toArray(outs), toArray(ins), toArray(rec));
  }

  /** Bytes in use at each position of {@code after}'s order. */
  public long at(int position) {
    return after.timeline()[position];
  }

  /** {@code lms4j/recompute/}, derived from {@link RecomputePlan#cloneName}. */
  private static String recomputePrefix() {
    String n = RecomputePlan.cloneName("g", "op");
    return n.substring(0, n.length() - "g/op".length());
  }

  private static int[] toArray(List<Integer> l) {
    return l.stream().mapToInt(Integer::intValue).toArray();
  }
}
