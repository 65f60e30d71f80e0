package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.List;

/**
 * Applies a {@link SwapPlan} to the graph model, giving the graph the rewritten TensorFlow graph
 * will be (swap-outs own no device memory; swap-ins allocate the tensor again). The simulator runs
 * on the result to predict the rewritten graph's peak.
 */
public final class PlanApplier {
  private PlanApplier() {}

  /** The graph with the plan's ops and edges inserted. */
  public static DataflowGraph apply(DataflowGraph g, SwapPlan plan) {
    if (plan.isEmpty()) {
      return g;
    }
    DataflowGraph.Builder b = g.toBuilder();
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      Op producer = g.opOrThrow(so.producer());
      Tensor t = producer.output(so.output());
      b.op(so.name(), OpTypes.SWAP_OUT, producer.category(), "", List.of(so.tensorName()),
          List.of(new Tensor(t.dtype(), t.shape(), 0, false)));
      for (SwapPlan.SwapIn si : so.swapIns()) {
        List<String> ins = new ArrayList<>();
        ins.add(so.name());
        for (String trig : si.triggers()) {
          ins.add("^" + trig);
        }
        Op first = g.opOrThrow(si.consumers().get(0));
        b.op(si.name(), OpTypes.SWAP_IN, first.category(), "", ins, List.of(t));
        TensorId tid = new TensorId(producer.id(), so.output());
        for (String c : si.consumers()) {
          List<TensorId> inputs = g.opOrThrow(c).inputs();
          for (int k = 0; k < inputs.size(); k++) {
            if (inputs.get(k).equals(tid)) {
              b.replaceInput(c, k, si.name());
            }
          }
        }
      }
      for (String c : so.syncConsumers()) {
        b.controlEdge(so.name(), c);
      }
    }
    for (SwapPlan.ControlEdge e : plan.controlEdges()) {
      b.controlEdge(e.from(), e.to());
    }
    return b.build();
  }
}
