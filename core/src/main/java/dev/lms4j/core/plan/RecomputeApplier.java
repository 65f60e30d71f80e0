package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Applies a {@link RecomputePlan} to the graph model (clones, re-pointed consumers, triggers,
 * and a control edge from each clone that reads a variable to the ops that update it:
 * {@link VariableReads}).
 */
public final class RecomputeApplier {
  private RecomputeApplier() {}

  /** The graph with the plan's clones inserted; throws IllegalArgumentException on a cycle. */
  public static DataflowGraph apply(DataflowGraph g, RecomputePlan plan) {
    if (plan.isEmpty()) {
      return g;
    }
    Map<Integer, Op> replaced = new HashMap<>();
    List<Op> added = new ArrayList<>();
    int next = g.size();
    for (RecomputePlan.Group gr : plan.groups()) {
      Map<Integer, Integer> cloneOf = new HashMap<>();
      Set<Integer> members = new HashSet<>();
      for (String name : gr.ops()) {
        members.add(g.opOrThrow(name).id());
      }
      List<Integer> triggers = new ArrayList<>();
      for (String t : gr.triggers()) {
        triggers.add(g.opOrThrow(t).id());
      }
      for (String name : gr.ops()) {
        Op o = g.opOrThrow(name);
        int id = next++;
        cloneOf.put(o.id(), id);
        List<TensorId> ins = new ArrayList<>();
        boolean root = true;
        for (TensorId in : o.inputs()) {
          Integer c = cloneOf.get(in.op());
          if (c != null) {
            ins.add(new TensorId(c, in.output()));
            root = false;
          } else if (members.contains(in.op())) {
            throw new IllegalArgumentException("group " + gr.name() + " lists " + name
                + " before its input " + g.op(in.op()).name());
          } else {
            ins.add(in);
          }
        }
        added.add(new Op(id, RecomputePlan.cloneName(gr.name(), name), o.type(),
            o.category(), o.device(), ins, root ? triggers : List.of(), o.outputs(),
            o.scratch())); // a clone runs the same kernel: its original's measured scratch
        // the variable's update waits for the clone, which then reads the forward pass's value
        for (int w : VariableReads.writers(g, o)) {
          Op wo = replaced.getOrDefault(w, g.op(w));
          List<Integer> ctl = new ArrayList<>(wo.controlInputs());
          ctl.add(id);
          replaced.put(w, new Op(wo.id(), wo.name(), wo.type(), wo.category(), wo.device(),
              wo.inputs(), ctl, wo.outputs()));
        }
      }
      for (RecomputePlan.Repoint rp : gr.repoints()) {
        int cid = g.opOrThrow(rp.consumer()).id();
        Op c = replaced.getOrDefault(cid, g.op(cid));
        TensorId from = new TensorId(g.opOrThrow(rp.op()).id(), rp.output());
        TensorId to = new TensorId(cloneOf.get(from.op()), rp.output());
        List<TensorId> ins = new ArrayList<>(c.inputs());
        ins.replaceAll(t -> t.equals(from) ? to : t);
        replaced.put(cid, new Op(c.id(), c.name(), c.type(), c.category(), c.device(), ins,
            c.controlInputs(), c.outputs()));
      }
    }
    return g.withEdits(replaced, added);
  }
}
