package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/**
 * Reads of variables that the step also updates, and the order a clone of such a read needs.
 *
 * <p>An op of the forward pass that reads a variable directly (a ref edge from
 * {@code VariableV2}, a resource handle, or an {@code Identity} of either, which aliases the
 * variable's buffer) sees the value before the optimizer's update: the update depends on the
 * loss, so it runs after the whole forward pass. A clone of that op runs in the backward pass,
 * and no data edge orders it before the update: the update of a layer norm's {@code beta} needs
 * only the sum of the incoming gradient, not the layer norm's output, so the executor may run
 * {@code ApplyGradientDescent(beta)} first and the clone then computes with the new value.
 * Measured: XLA-style remat of GPT-2's layer norms ({@code Mul_1 = x * gamma},
 * {@code Add_1 = Mul_1 + beta}) fed the next MatMul's weight gradient with
 * {@code Add_1 + delta beta} (17,409 of 49,152 elements of {@code c_attn/kernel} differed after
 * one step; the second loss moved by one ulp). Whether it happens depends on the executor's
 * order: with grappler's arithmetic optimizer off the update ran one position later and the
 * losses happened to match.
 *
 * <p>So every clone that reads such a variable gets a control edge to each op that writes it
 * ({@link #writers}): the update waits for the clone, and the clone reads exactly the value the
 * forward pass read (nothing writes a variable between the forward pass and the optimizer). This
 * is exact without giving up the recomputation; it delays only those updates, whose inputs (the
 * variable's gradient) stay alive until the clone has run, which the simulator sees because
 * {@link RecomputeApplier} adds the same edges.
 */
public final class VariableReads {
  private VariableReads() {}

  /** Whether {@code op} reads, directly or through an Identity, a variable the graph writes. */
  public static boolean readsUpdatedVariable(DataflowGraph g, Op op) {
    return !writers(g, op).isEmpty();
  }

  /**
   * Ids of the ops that write a variable {@code op} reads (directly or through Identity ops),
   * ascending: a clone of {@code op} must run before each of them.
   */
  public static List<Integer> writers(DataflowGraph g, Op op) {
    TreeSet<Integer> out = new TreeSet<>();
    for (TensorId in : op.inputs()) {
      int v = variableBehind(g, in);
      if (v >= 0) {
        collectWriters(g, v, out, 0);
      }
    }
    return new ArrayList<>(out);
  }

  /** The variable op whose buffer {@code t} is (through Identity ops), or -1. */
  private static int variableBehind(DataflowGraph g, TensorId t) {
    Op p = g.op(t.op());
    for (int hops = 0; hops < 64; hops++) {
      if (OpTypes.VARIABLES.contains(p.type())) {
        return p.id();
      }
      if (!p.type().equals("Identity") || p.inputs().isEmpty()) {
        return -1;
      }
      p = g.op(p.inputs().get(0).op());
    }
    return -1;
  }

  /** Consumers of {@code v}'s outputs (through Identity ops) that update the variable. */
  private static void collectWriters(DataflowGraph g, int v, TreeSet<Integer> out, int depth) {
    Op var = g.op(v);
    for (int i = 0; i < var.outputs().size(); i++) {
      for (int c : g.consumers(new TensorId(v, i))) {
        Op co = g.op(c);
        if (co.category() == OpCategory.OPTIMIZER || OpTypes.isVariableWriter(co.type())) {
          out.add(c);
        } else if (co.type().equals("Identity") && depth < 64) {
          collectWriters(g, c, out, depth + 1);
        }
      }
    }
  }
}
