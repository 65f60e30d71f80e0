package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The worked example of docs/planner.md: a new planner is one class. It swaps the {@code k}
 * largest forward activations that the backward pass reads (as the tensor policy allows), each
 * swap-in triggered by the other inputs of its first backward reader.
 */
final class LargestActivationsPlanner implements Planner {
  private final int k;

  LargestActivationsPlanner(int k) {
    this.k = k;
  }

  @Override
  public String name() {
    return "largest-" + k;
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    long before = new MemoryPlan(name(), List.of(), SwapPlan.empty(ctx.params()),
        new MemoryPlan.Estimate(0, 0, 0, 0, 0), null).simulatePeak(g);
    List<TensorId> candidates = new ArrayList<>();
    for (Op op : g.ops()) {
      for (int i = 0; i < op.outputs().size(); i++) {
        TensorId t = new TensorId(op.id(), i);
        if (op.category() == OpCategory.FORWARD && ctx.policy().maySwap(g, t)
            && backwardReaders(g, t, ctx).size() > 0) {
          candidates.add(t);
        }
      }
    }
    candidates.sort(Comparator.comparingLong((TensorId t) -> g.tensor(t).bytes()).reversed()
        .thenComparing(Comparator.naturalOrder()));
    List<SwapPlan.SwapOut> outs = new ArrayList<>();
    for (TensorId t : candidates.subList(0, Math.min(k, candidates.size()))) {
      Op prod = g.op(t.op());
      List<Op> readers = backwardReaders(g, t, ctx);
      List<String> triggers = new ArrayList<>();
      for (TensorId in : readers.get(0).inputs()) {
        if (!in.equals(t) && g.op(in.op()).category() != OpCategory.FORWARD) {
          triggers.add(g.op(in.op()).name());
        }
      }
      String base = prod.name() + "_" + t.output();
      outs.add(new SwapPlan.SwapOut(prod.name(), t.output(), g.tensor(t).dtype(),
          g.tensor(t).bytes(), OpTypes.LMS_PREFIX + "swapout/" + base,
          List.of(new SwapPlan.SwapIn(OpTypes.LMS_PREFIX + "swapin/" + base + "/0",
              readers.stream().map(Op::name).toList(), triggers)), List.of()));
    }
    SwapPlan swaps = new SwapPlan(ctx.params(), outs, List.of());
    MemoryPlan p = MemoryPlan.of(name(), g, RecomputePlan.empty(), swaps, before, 0, 1, ctx);
    return p.withEstimate(new MemoryPlan.Estimate(before, p.simulatePeak(g),
        p.estimate().stepMsBefore(), p.estimate().stepMsAfter(), 2));
  }

  /** Backward readers of {@code t} that may read a swap-in, in id order. */
  private static List<Op> backwardReaders(DataflowGraph g, TensorId t, PlanningContext ctx) {
    List<Op> out = new ArrayList<>();
    for (int c : java.util.Arrays.stream(g.consumers(t)).distinct().sorted().toArray()) {
      Op co = g.op(c);
      if (co.category() == OpCategory.BACKWARD && ctx.policy().maySwapInto(co)) {
        out.add(co);
      }
    }
    return out;
  }
}
