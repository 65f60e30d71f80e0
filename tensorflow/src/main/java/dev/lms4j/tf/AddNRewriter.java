package dev.lms4j.tf;

import dev.lms4j.core.schedule.AddNChains;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Applies {@link AddNChains} to a GraphDef: each planned {@code AddN} / {@code AccumulateNV2}
 * becomes a chain of {@code AddV2}s adding its inputs in the planned order. The last add keeps the
 * AddN's name, so readers and fetches are unchanged; the others are named
 * {@link AddNChains#addName}. The first add takes over the AddN's control inputs; every add keeps
 * its device and dtype.
 *
 * <pre>{@code
 * List<AddNChains.Chain> chains = AddNChains.plan(model, Levels.of(model).schedule());
 * GraphDef chained = AddNRewriter.rewrite(gd, chains);
 * }</pre>
 *
 * <p>Grappler's arithmetic optimizer would fold a chain of adds straight back into one AddN
 * ({@code AddOpsRewrite}); the adds carry that stage's own marker attribute
 * ({@value #ADD_OPS_REWRITE_TAG}), which makes it leave them alone.
 *
 * <p>The sum is the same up to float rounding: TensorFlow's AddN adds its inputs in input order,
 * the chain in production order, so the last bits may differ (losses agree to about 1e-7
 * relative). The rewrite is pure: the input GraphDef is not changed.
 */
public final class AddNRewriter {
  /** Grappler's marker for nodes its AddOpsRewrite stage already handled. */
  public static final String ADD_OPS_REWRITE_TAG =
      "_grappler_ArithmeticOptimizer_AddOpsRewriteStage";

  private static final Logger LOG = LoggerFactory.getLogger(AddNRewriter.class);

  private AddNRewriter() {}

  /**
   * The rewritten GraphDef.
   *
   * @throws IllegalArgumentException when a chain names a node that is not an AddN or
   *                                  AccumulateNV2, or inputs that are not the node's inputs
   */
  public static GraphDef rewrite(GraphDef gd, List<AddNChains.Chain> chains) {
    if (chains.isEmpty()) {
      return gd;
    }
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    List<NodeDef.Builder> added = new ArrayList<>();
    AttrValue tag = AttrValue.newBuilder().setB(true).build();
    for (AddNChains.Chain c : chains) {
      NodeDef.Builder node = nodes.get(c.op());
      if (node == null || !AddNChains.TYPES.contains(node.getOp())) {
        throw new IllegalArgumentException("chain names " + c.op() + ", which is "
            + (node == null ? "not in the graph" : "a " + node.getOp() + ", not an AddN"));
      }
      List<String> data = new ArrayList<>();
      List<String> control = new ArrayList<>();
      for (String in : node.getInputList()) {
        (in.startsWith("^") ? control : data).add(in.startsWith("^") ? in : canonical(in));
      }
      List<String> ins = c.inputs().stream().map(AddNRewriter::canonical).toList();
      if (!data.stream().sorted().toList().equals(ins.stream().sorted().toList())) {
        throw new IllegalArgumentException("chain of " + c.op() + " lists " + c.inputs()
            + " but the node reads " + data);
      }
      AttrValue type = node.getAttrOrThrow("T");
      String acc = null;
      for (int i = 1; i < ins.size() - 1; i++) {
        NodeDef.Builder add = NodeDef.newBuilder().setName(AddNChains.addName(c.op(), i))
            .setOp("AddV2").setDevice(node.getDevice())
            .addInput(acc == null ? ins.get(0) : acc).addInput(ins.get(i))
            .putAttr("T", type).putAttr(ADD_OPS_REWRITE_TAG, tag);
        if (i == 1) {
          add.addAllInput(control);
        }
        added.add(add);
        acc = add.getName();
      }
      NodeDef.Builder last = NodeDef.newBuilder().setName(c.op()).setOp("AddV2")
          .setDevice(node.getDevice()).addInput(acc).addInput(ins.get(ins.size() - 1))
          .putAttr("T", type).putAttr(ADD_OPS_REWRITE_TAG, tag);
      node.getAttrMap().forEach((k, v) -> {
        if (k.startsWith("_") && !k.equals(ADD_OPS_REWRITE_TAG)) {
          last.putAttr(k, v);
        }
      });
      if (node.hasExperimentalDebugInfo()) {
        last.setExperimentalDebugInfo(node.getExperimentalDebugInfo());
      }
      nodes.put(c.op(), last);
    }
    GraphDef.Builder out = gd.toBuilder().clearNode();
    nodes.values().forEach(out::addNode);
    added.forEach(out::addNode);
    LOG.debug("{} AddN ops rewritten as chains ({} adds added)", chains.size(), added.size());
    return out.build();
  }

  /** {@code op:0} as TensorFlow writes it ({@code op}); other names unchanged. */
  private static String canonical(String tensor) {
    return tensor.endsWith(":0") ? tensor.substring(0, tensor.length() - 2) : tensor;
  }
}
