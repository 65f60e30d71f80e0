package dev.lms4j.tf;

import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.plan.RecomputePlan;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Applies a {@link RecomputePlan} to a GraphDef: each group's ops are cloned (same op, attributes
 * and device, under {@code lms4j/recompute/<group>/}), clones read each other inside the group and
 * the originals' inputs outside it, the group's roots wait for its triggers through control
 * edges, and the listed backward consumers are re-pointed to the clones. A clone that reads a
 * variable (directly or through an {@code Identity}) gets a control edge to every op that
 * updates that variable, so that it reads the value the forward pass read rather than the
 * optimizer's result ({@link dev.lms4j.core.plan.VariableReads}). The input is not changed.
 */
public final class RecomputeRewriter {
  /** Attribute that marks an op for manual recomputation (any value). */
  public static final String HINT_ATTR = "_recompute_hint";

  private RecomputeRewriter() {}

  /** The rewritten GraphDef. */
  public static GraphDef rewrite(GraphDef gd, RecomputePlan plan) {
    if (plan.isEmpty()) {
      return gd;
    }
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    GraphDef.Builder out = gd.toBuilder().clearNode();
    java.util.List<NodeDef.Builder> added = new java.util.ArrayList<>();
    Map<String, java.util.List<String>> writers = writersByVariable(gd);
    java.util.Set<String> stepWriters = descendants(gd, plan);
    ControlSources sources = ControlSources.of(nodes);
    for (RecomputePlan.Group gr : plan.groups()) {
      Map<String, String> clones = new HashMap<>();
      Set<String> readers = new HashSet<>();
      gr.repoints().forEach(rp -> readers.add(rp.consumer()));
      for (String op : gr.ops()) {
        clones.put(op, RecomputePlan.cloneName(gr.name(), op));
      }
      for (String op : gr.ops()) {
        NodeDef.Builder orig = nodes.get(op);
        if (orig == null) {
          throw new IllegalArgumentException("plan names unknown op " + op);
        }
        NodeDef.Builder c = orig.clone().setName(clones.get(op)).clearInput();
        boolean root = true;
        for (String in : orig.getInputList()) {
          if (in.startsWith("^")) {
            c.addInput(in);
            continue;
          }
          String src = GraphImporter.opName(in);
          String clone = clones.get(src);
          if (clone != null) {
            c.addInput(in.equals(src) ? clone : clone + in.substring(src.length()));
            root = false;
          } else {
            c.addInput(in);
          }
        }
        if (root) {
          for (String t : gr.triggers()) {
            c.addInput("^" + sources.source(t, readers));
          }
        }
        c.putAttr("_grappler_do_not_remove", AttrValue.newBuilder().setB(true).build());
        added.add(c);
        for (String in : orig.getInputList()) {
          String v = in.startsWith("^") ? null : variableBehind(nodes, GraphImporter.opName(in));
          for (String w : v == null ? java.util.List.<String>of()
              : writers.getOrDefault(v, java.util.List.of())) {
            NodeDef.Builder wb = nodes.get(w);
            // only updates of the step (after the forward pass), not initializers
            if (stepWriters.contains(w) && !wb.getInputList().contains("^" + c.getName())) {
              wb.addInput("^" + c.getName());
            }
          }
        }
      }
      for (RecomputePlan.Repoint rp : gr.repoints()) {
        NodeDef.Builder cb = nodes.get(rp.consumer());
        String tensor = rp.op() + ":" + rp.output();
        String clone = clones.get(rp.op()) + (rp.output() == 0 ? "" : ":" + rp.output());
        for (int k = 0; k < cb.getInputCount(); k++) {
          String ref = cb.getInput(k);
          if (ref.equals(tensor) || (rp.output() == 0 && ref.equals(rp.op()))) {
            cb.setInput(k, clone);
          }
        }
      }
    }
    nodes.values().forEach(out::addNode);
    added.forEach(out::addNode);
    return out.build();
  }

  /** The variable node whose buffer op {@code name}'s output is (through Identity), or null. */
  private static String variableBehind(Map<String, NodeDef.Builder> nodes, String name) {
    for (int hops = 0; hops < 64 && name != null; hops++) {
      NodeDef.Builder n = nodes.get(name);
      if (n == null) {
        return null;
      }
      if (OpTypes.VARIABLES.contains(n.getOp())) {
        return name;
      }
      if (!n.getOp().equals("Identity") || n.getInputCount() == 0
          || n.getInput(0).startsWith("^")) {
        return null;
      }
      name = GraphImporter.opName(n.getInput(0));
    }
    return null;
  }

  /**
   * Ops that run after a cloned op in the graph (data or control edges): the step's updates do
   * (they depend on the loss); initializers ({@code Assign} under an init op) do not, and must
   * not wait for a clone (running the init op would then need the step's feeds).
   */
  private static java.util.Set<String> descendants(GraphDef gd, RecomputePlan plan) {
    Map<String, java.util.List<String>> succ = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      for (String in : n.getInputList()) {
        succ.computeIfAbsent(GraphImporter.opName(in.startsWith("^") ? in.substring(1) : in),
            k -> new java.util.ArrayList<>()).add(n.getName());
      }
    }
    java.util.Set<String> seen = new java.util.HashSet<>();
    java.util.ArrayDeque<String> queue = new java.util.ArrayDeque<>();
    for (RecomputePlan.Group gr : plan.groups()) {
      queue.addAll(gr.ops());
    }
    while (!queue.isEmpty()) {
      for (String s : succ.getOrDefault(queue.poll(), java.util.List.of())) {
        if (seen.add(s)) {
          queue.add(s);
        }
      }
    }
    return seen;
  }

  /** Ops that update each variable (reading it, or an Identity of it), by variable name. */
  private static Map<String, java.util.List<String>> writersByVariable(GraphDef gd) {
    Map<String, NodeDef.Builder> nodes = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    Map<String, java.util.List<String>> out = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      if (!OpTypes.isVariableWriter(n.getOp())) {
        continue;
      }
      for (String in : n.getInputList()) {
        String v = in.startsWith("^") ? null : variableBehind(nodes, GraphImporter.opName(in));
        if (v != null) {
          java.util.List<String> ws = out.computeIfAbsent(v, k -> new java.util.ArrayList<>());
          if (!ws.contains(n.getName())) {
            ws.add(n.getName());
          }
        }
      }
    }
    return out;
  }

  /** Names of the ops marked with {@link #HINT_ATTR}, sorted. */
  public static java.util.SortedSet<String> hintedOps(GraphDef gd) {
    java.util.SortedSet<String> s = new java.util.TreeSet<>();
    for (NodeDef n : gd.getNodeList()) {
      if (n.containsAttr(HINT_ATTR)) {
        s.add(n.getName());
      }
    }
    return s;
  }
}
