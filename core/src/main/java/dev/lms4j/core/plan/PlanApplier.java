package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Applies a {@link SwapPlan} to the graph model, giving the graph the rewritten TensorFlow graph
 * will be (swap-outs own no device memory; swap-ins allocate the tensor again). The simulator runs
 * on the result to predict the rewritten graph's peak. Works on ids (no name resolution), so the
 * auto-tuner can apply many candidate plans quickly.
 */
public final class PlanApplier {
  private PlanApplier() {}

  /** The graph with the plan's ops and edges inserted. */
  public static DataflowGraph apply(DataflowGraph g, SwapPlan plan) {
    if (plan.isEmpty()) {
      return g;
    }
    Map<Integer, Op> replaced = new HashMap<>();
    List<Op> added = new ArrayList<>();
    int next = g.size();
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      Op producer = g.opOrThrow(so.producer());
      Tensor t = producer.output(so.output());
      TensorId tid = new TensorId(producer.id(), so.output());
      int soId = next++;
      added.add(new Op(soId, so.name(), OpTypes.SWAP_OUT, producer.category(), "", List.of(tid),
          List.of(), List.of(new Tensor(t.dtype(), t.shape(), 0, false))));
      for (SwapPlan.SwapIn si : so.swapIns()) {
        int siId = next++;
        List<Integer> triggers = new ArrayList<>(si.triggers().size());
        for (String trig : si.triggers()) {
          triggers.add(g.opOrThrow(trig).id());
        }
        Op first = g.opOrThrow(si.consumers().get(0));
        added.add(new Op(siId, si.name(), OpTypes.SWAP_IN, first.category(), "",
            List.of(new TensorId(soId, 0)), triggers, List.of(t)));
        TensorId swapped = new TensorId(siId, 0);
        for (String c : si.consumers()) {
          Op op = current(g, replaced, g.opOrThrow(c).id());
          List<TensorId> ins = new ArrayList<>(op.inputs());
          ins.replaceAll(in -> in.equals(tid) ? swapped : in);
          replaced.put(op.id(), with(op, ins, op.controlInputs()));
        }
      }
      for (String c : so.syncConsumers()) {
        addControl(g, replaced, g.opOrThrow(c).id(), soId);
      }
    }
    for (SwapPlan.ControlEdge e : plan.controlEdges()) {
      addControl(g, replaced, g.opOrThrow(e.to()).id(), g.opOrThrow(e.from()).id());
    }
    return g.withEdits(replaced, added);
  }

  private static Op current(DataflowGraph g, Map<Integer, Op> replaced, int id) {
    Op r = replaced.get(id);
    return r != null ? r : g.op(id);
  }

  private static void addControl(DataflowGraph g, Map<Integer, Op> replaced, int to, int from) {
    Op op = current(g, replaced, to);
    if (!op.controlInputs().contains(from)) {
      List<Integer> ctl = new ArrayList<>(op.controlInputs());
      ctl.add(from);
      replaced.put(to, with(op, op.inputs(), ctl));
    }
  }

  private static Op with(Op op, List<TensorId> inputs, List<Integer> controls) {
    return new Op(op.id(), op.name(), op.type(), op.category(), op.device(), inputs, controls,
        op.outputs());
  }
}
