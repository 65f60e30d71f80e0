package dev.lms4j.tf;

import dev.lms4j.core.plan.RecomputePlan;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Applies a {@link RecomputePlan} to a GraphDef: each group's ops are cloned (same op, attributes
 * and device, under {@code lms4j/recompute/<group>/}), clones read each other inside the group and
 * the originals' inputs outside it, the group's roots wait for its triggers through control
 * edges, and the listed backward consumers are re-pointed to the clones. The input is not
 * changed.
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
    for (RecomputePlan.Group gr : plan.groups()) {
      Map<String, String> clones = new HashMap<>();
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
            c.addInput("^" + t);
          }
        }
        c.putAttr("_grappler_do_not_remove", AttrValue.newBuilder().setB(true).build());
        added.add(c);
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
