package dev.lms4j.tf;

import dev.lms4j.core.graph.OpTypes;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.NodeDefOrBuilder;

/**
 * The ops {@link SerialOrder} leaves out of its chain: those TensorFlow fuses or removes only
 * where no control edge holds them. Grappler's remapper fuses a pattern only where its ops have
 * no control edge in or out (a contraction and its bias add into {@code _FusedConv2D} /
 * {@code _FusedMatMul}, oneDNN's {@code _MklNativeFusedConv2D} here); oneDNN's layout pass merges
 * a filter gradient with the bias gradient of the same incoming gradient
 * ({@code _MklNativeConv2DBackpropFilterWithBias}) once the model pruner has removed the identity
 * between them, which it does not where the identity has a control edge; the arithmetic
 * optimizer removes a reshape to its input's own shape only without one. A fused kernel rounds
 * differently from the ops it replaces, and a sum sums its inputs in name order, so a control
 * edge on one of these ops changes the losses' last bits. Measured on the corpus DenseNet (test
 * size): chained with these ops in the chain, the partition graphs ran 8 convolutions and 8
 * filter gradients unfused and the second loss moved by 1 ulp; left out of the chain, the
 * partition graphs hold the same kernels as for the graph as given. (The planners' own guard
 * against breaking a fused chain, on the model, is {@code dev.lms4j.core.plan.Fusions}.)
 *
 * <p>The patterns are matched conservatively (an op that might be fused is named): a
 * contraction ({@code Conv2D}, {@code Conv3D}, {@code DepthwiseConv2dNative}, {@code MatMul},
 * {@code BatchMatMul*}) read by exactly one op that is a bias add or an add (or, for a batch
 * product, a product), and up to two single element-wise readers after that (an activation or a
 * residual add); a contraction read by a single activation; a {@code FusedBatchNorm*} whose
 * output 0 is read by a single activation or add (its statistics may have readers of their
 * own); a {@code Conv2DBackpropFilter} whose incoming gradient a
 * {@code BiasAddGrad} also reads ({@link #merges}); a {@code Sigmoid} multiplied with its own
 * input (swish); and ops that forward a buffer or make a few bytes of shape (identities,
 * reshapes, shapes). An op that reads a ref variable stays in the chain unless it is an ancestor
 * of the variable's update.
 */
public final class UnchainedOps {
  private static final Set<String> CONTRACTIONS = Set.of("Conv2D", "Conv3D",
      "DepthwiseConv2dNative", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3");
  /** Read by a contraction: a bias add, an add, or (a batch product's) a product. */
  private static final Set<String> BIAS = Set.of("BiasAdd", "Add", "AddV2", "Mul");
  private static final Set<String> ELEMENTWISE = Set.of("Relu", "Relu6", "Elu", "LeakyRelu",
      "Tanh", "Sigmoid", "Softplus", "Selu", "Gelu", "Add", "AddV2", "Mul");
  private static final Set<String> ACTIVATIONS = Set.of("Relu", "Relu6", "Elu", "LeakyRelu",
      "Tanh", "Sigmoid", "Gelu");

  /**
   * Ops that allocate nothing (they forward their input's buffer) or a few bytes, which grappler
   * removes or folds where no control edge holds them: the model pruner takes out identities,
   * the arithmetic optimizer a reshape to the shape its input has (then the sum reading it sees
   * another input name, and sums its inputs in name order), constant folding materialises
   * shapes.
   */
  private static final Set<String> FORWARDING = Set.of("Identity", "IdentityN", "Snapshot",
      "StopGradient", "PreventGradient", "Reshape", "ExpandDims", "Squeeze", "Shape", "ShapeN",
      "Size", "Rank");
  /**
   * Of those, the ones that run no kernel where no control edge holds them: identities the
   * model pruner removes, shapes constant folding materialises. (A reshape stays a kernel of its
   * own unless its input already has the shape: measured on the corpus U-Net, the head's filter
   * gradient, reading its incoming gradient through a reshape, ran after the chain's next op.)
   */
  private static final Set<String> REMOVED = Set.of("Identity", "IdentityN", "Snapshot",
      "StopGradient", "PreventGradient", "Shape", "ShapeN", "Size", "Rank");
  /** Ops that write a variable given as their first input. */
  private static final java.util.regex.Pattern UPDATES = java.util.regex.Pattern.compile(
      "(Resource)?(Sparse)?Apply.*|Assign(Add|Sub)?|Scatter.*");

  private UnchainedOps() {}

  /**
   * The ops of {@code gd} that TensorFlow may fuse or remove, less those that read a ref
   * variable a step op updates without being that update's ancestor.
   *
   * @param gd   a graph
   * @param step the ops a training step runs (whose variable updates count)
   * @return their names, in the graph's order
   */
  public static Set<String> of(GraphDef gd, Set<String> step) {
    Map<String, NodeDef> byName = new HashMap<>();
    Map<String, List<NodeDef>> readers = new HashMap<>();
    // readers of output 0 alone: a batch norm's other outputs (statistics, reserve spaces) may
    // have readers of their own without keeping grappler from fusing output 0's activation
    Map<String, List<NodeDef>> firstOutputReaders = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      byName.put(n.getName(), n);
    }
    for (NodeDef n : gd.getNodeList()) {
      for (String in : n.getInputList()) {
        if (!in.startsWith("^")) {
          readers.computeIfAbsent(GraphImporter.opName(in), k -> new ArrayList<>()).add(n);
          if (!in.contains(":") || in.endsWith(":0")) {
            firstOutputReaders.computeIfAbsent(GraphImporter.opName(in), k -> new ArrayList<>())
                .add(n);
          }
        }
      }
    }
    Set<String> out = new LinkedHashSet<>();
    merges(gd.getNodeList(), byName).forEach((grad, op) -> {
      out.add(grad);
      out.add(op);
    });
    for (NodeDef n : gd.getNodeList()) {
      if (FORWARDING.contains(n.getOp())) {
        out.add(n.getName());
      }
      List<NodeDef> rs = readers.getOrDefault(n.getName(), List.of());
      String op = n.getOp();
      if (CONTRACTIONS.contains(op) && rs.size() == 1) {
        NodeDef r = rs.get(0);
        if (BIAS.contains(r.getOp()) && (!r.getOp().equals("Mul") || op.startsWith("Batch"))) {
          out.add(n.getName());
          out.add(r.getName());
          NodeDef last = r;
          for (int i = 0; i < 2; i++) {
            List<NodeDef> next = readers.getOrDefault(last.getName(), List.of());
            if (next.size() != 1 || !ELEMENTWISE.contains(next.get(0).getOp())) {
              break;
            }
            last = next.get(0);
            out.add(last.getName());
          }
        } else if (ACTIVATIONS.contains(r.getOp())) {
          out.add(n.getName());
          out.add(r.getName());
        }
      }
      List<NodeDef> ys = firstOutputReaders.getOrDefault(n.getName(), List.of());
      if (OpTypes.BATCH_NORMS.contains(op) && ys.size() == 1
          && (ACTIVATIONS.contains(ys.get(0).getOp()) || BIAS.contains(ys.get(0).getOp()))) {
        out.add(n.getName());
        out.add(ys.get(0).getName());
      }
      if (op.equals("Sigmoid") && n.getInputCount() > 0) {
        String x = n.getInput(0);
        for (NodeDef r : rs) {
          if (r.getOp().equals("Mul") && r.getInputList().contains(x)) {
            out.add(n.getName());
            out.add(r.getName());
          }
        }
      }
    }
    keepReadsBeforeUpdates(gd, byName, step, out);
    return out;
  }

  /**
   * Of the ops {@link #of} left out of the chain, those that are no kernel of their own when
   * TensorFlow runs the graph: identities (removed), shapes (folded), and the bias adds and
   * activations fused into the contraction or batch norm before them (read in the graph's
   * order, so a fused chain's later ops follow its first). {@link
   * dev.lms4j.core.graph.ExecutorOrder} runs them the moment they are ready.
   *
   * @param gd        a graph
   * @param unchained what {@link #of} returned for it
   * @return their names, in the graph's order
   */
  public static Set<String> atOnce(GraphDef gd, Set<String> unchained) {
    Set<String> out = new LinkedHashSet<>();
    Set<String> fused = new java.util.HashSet<>();
    // a fused chain is written producer first in graphs built in creation order; a few passes
    // take it in any order
    for (int pass = 0; pass < 3; pass++) {
      for (NodeDef n : gd.getNodeList()) {
        String name = n.getName();
        if (!unchained.contains(name) || out.contains(name)) {
          continue;
        }
        String op = n.getOp();
        if (REMOVED.contains(op)) {
          out.add(name);
          continue;
        }
        if (CONTRACTIONS.contains(op) || OpTypes.BATCH_NORMS.contains(op)) {
          fused.add(name);
          continue;
        }
        if (BIAS.contains(op) || ELEMENTWISE.contains(op)) {
          for (String in : n.getInputList()) {
            String src = GraphImporter.opName(in);
            if (!in.startsWith("^") && fused.contains(src)) {
              out.add(name);
              fused.add(name);
              break;
            }
          }
        }
      }
    }
    return out;
  }

  /**
   * Takes out of {@code out} every op that reads a ref variable's buffer (through identities)
   * and is not an ancestor of each op that updates the variable: only its place in the chain
   * runs it before the update. A precaution, not a measured failure: the LeNet loss change first
   * suspected of this was the merged bias gradient's cycle ({@link #merges}); no graph checked
   * had a left-out op that needed this rule for its losses. A resource variable's
   * {@code ReadVariableOp} is a snapshot (the update copies a buffer a read still holds), so its
   * readers are not readers of the variable.
   */
  private static void keepReadsBeforeUpdates(GraphDef gd, Map<String, NodeDef> byName,
      Set<String> step, Set<String> out) {
    Map<String, List<String>> updates = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      if (n.getInputCount() > 0 && step.contains(n.getName())
          && UPDATES.matcher(n.getOp()).matches()) {
        String v = variable(n.getInput(0), byName);
        if (v != null) {
          updates.computeIfAbsent(v, k -> new ArrayList<>()).add(n.getName());
        }
      }
    }
    Map<String, Set<String>> ancestors = new HashMap<>();
    for (java.util.Iterator<String> it = out.iterator(); it.hasNext(); ) {
      NodeDef n = byName.get(it.next());
      if (FORWARDING.contains(n.getOp()) || UPDATES.matcher(n.getOp()).matches()) {
        continue;
      }
      boolean racing = false;
      for (String in : n.getInputList()) {
        String v = in.startsWith("^") ? null : variable(in, byName);
        for (String u : v == null ? List.<String>of() : updates.getOrDefault(v, List.of())) {
          racing |= !ancestors.computeIfAbsent(u, k -> GraphImporter.ancestors(gd, Set.of(k)))
              .contains(n.getName());
        }
      }
      if (racing) {
        it.remove();
      }
    }
  }

  /** The ref variable whose buffer {@code ref} is (through identities), or null. */
  private static String variable(String ref, Map<String, NodeDef> byName) {
    NodeDef n = byName.get(GraphImporter.opName(through(ref, byName)));
    return n != null && (n.getOp().equals("VariableV2") || n.getOp().equals("Variable"))
        ? n.getName() : null;
  }

  /**
   * The bias gradients oneDNN's layout pass merges into the op that computes a weight gradient
   * from the same incoming gradient: a {@code BiasAddGrad} with a {@code Conv2DBackpropFilter}
   * (into {@code _MklNativeConv2DBackpropFilterWithBias}), seen through the identities the
   * pruner removes. (A dense layer's {@code MatMul} and bias gradient stay apart: read from the
   * zoo LeNet's partition graphs.) The merged op computes the bias gradient
   * once all of the weight gradient's inputs are there, so an op that reads the bias gradient
   * must not be ordered before them ({@link GraphImporter} gives the model that edge). Measured
   * on the zoo's LeNet, auto's plan for 88 MiB, chained in the order of a model without it: the
   * bias update waited on a recomputed pool that the merged op needed, and TensorFlow ended the
   * step without running the cycle: the updates of two layers never ran, without an error.
   *
   * @param gd a graph
   * @return bias gradient to the op it is merged into
   */
  public static Map<String, String> merges(GraphDef gd) {
    Map<String, NodeDef> byName = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      byName.put(n.getName(), n);
    }
    return merges(gd.getNodeList(), byName);
  }

  /**
   * As {@link #merges(GraphDef)}, over nodes being rewritten (builders show their edits).
   *
   * @param nodes  the graph's nodes, in graph order
   * @param byName the same nodes by name
   */
  static Map<String, String> merges(Iterable<? extends NodeDefOrBuilder> nodes,
      Map<String, ? extends NodeDefOrBuilder> byName) {
    Map<String, List<String>> weightGrads = new HashMap<>();
    for (NodeDefOrBuilder n : nodes) {
      if (n.getOp().equals("Conv2DBackpropFilter") && n.getInputCount() > 2) {
        weightGrads.computeIfAbsent(through(n.getInput(2), byName), k -> new ArrayList<>())
            .add(n.getName());
      }
    }
    Map<String, String> out = new java.util.LinkedHashMap<>();
    for (NodeDefOrBuilder n : nodes) {
      if (n.getOp().equals("BiasAddGrad") && n.getInputCount() > 0) {
        List<String> ws = weightGrads.getOrDefault(through(n.getInput(0), byName), List.of());
        if (!ws.isEmpty()) {
          out.put(n.getName(), ws.get(0));
        }
      }
    }
    return out;
  }

  /**
   * The pairs of {@link #merges} that oneDNN's layout pass merges in {@code gd} as written, as
   * TensorFlow 2.18 decides (read from its sources): after grappler's model pruner has removed
   * the identities it removes (an {@code Identity} with no control edge in or out, not fed by a
   * {@code Switch} nor read by a {@code Merge}, on its input's device, not marked
   * {@code _grappler_do_not_remove}), the bias gradient's input and the filter gradient's
   * incoming gradient come from the same op, and both ops wait on the same control inputs. The
   * layout pass checks no more than that: not whether merging them closes a cycle.
   *
   * @param gd a graph (as lms4j hands it to TensorFlow)
   * @return bias gradient to the filter gradient it is merged into
   */
  public static Map<String, String> mergedAsWritten(GraphDef gd) {
    Map<String, NodeDef> byName = new HashMap<>();
    Set<String> controlSources = new java.util.HashSet<>();
    Set<String> readByMerge = new java.util.HashSet<>();
    for (NodeDef n : gd.getNodeList()) {
      byName.put(n.getName(), n);
      for (String in : n.getInputList()) {
        if (in.startsWith("^")) {
          controlSources.add(in.substring(1));
        } else if (n.getOp().endsWith("Merge")) {
          readByMerge.add(GraphImporter.opName(in));
        }
      }
    }
    Map<String, String> out = new java.util.LinkedHashMap<>();
    merges(gd.getNodeList(), byName).forEach((bias, filter) -> {
      NodeDef b = byName.get(bias);
      NodeDef f = byName.get(filter);
      String from = producer(b.getInput(0), byName, controlSources, readByMerge);
      if (from.equals(producer(f.getInput(2), byName, controlSources, readByMerge))
          && controls(b).equals(controls(f))) {
        out.put(bias, filter);
      }
    });
    return out;
  }

  /** The op behind {@code ref} once the model pruner has removed the identities it removes. */
  private static String producer(String ref, Map<String, NodeDef> byName,
      Set<String> controlSources, Set<String> readByMerge) {
    String name = GraphImporter.opName(ref);
    for (int hops = 0; hops < 16; hops++) {
      NodeDef n = byName.get(name);
      if (n == null || !n.getOp().equals("Identity") || n.getInputCount() != 1
          || n.getInput(0).startsWith("^") || controlSources.contains(name)
          || readByMerge.contains(name)
          || n.getAttrOrDefault("_grappler_do_not_remove",
              org.tensorflow.proto.AttrValue.getDefaultInstance()).getB()) {
        return name;
      }
      NodeDef in = byName.get(GraphImporter.opName(n.getInput(0)));
      if (in == null || in.getOp().endsWith("Switch") || !in.getDevice().equals(n.getDevice())) {
        return name;
      }
      name = in.getName();
    }
    return name;
  }

  /** The ops {@code n} waits on through control inputs. */
  private static Set<String> controls(NodeDef n) {
    Set<String> out = new java.util.TreeSet<>();
    for (String in : n.getInputList()) {
      if (in.startsWith("^")) {
        out.add(in.substring(1));
      }
    }
    return out;
  }

  /** The tensor {@code ref} forwards, through identities: {@code a:0} for {@code a}. */
  private static String through(String ref, Map<String, ? extends NodeDefOrBuilder> byName) {
    String r = ref;
    for (int hops = 0; hops < 16; hops++) {
      NodeDefOrBuilder n = byName.get(GraphImporter.opName(r));
      if (n == null || !n.getOp().equals("Identity") || n.getInputCount() == 0
          || n.getInput(0).startsWith("^")) {
        break;
      }
      r = n.getInput(0);
    }
    return r.contains(":") ? r : r + ":0";
  }
}
