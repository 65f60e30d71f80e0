package dev.lms4j.tf;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.GraphOperation;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Turns a gradient-descent update of a whole embedding table by a dense, table-sized gradient of
 * a gather into an update of only the rows the step looked up, with the same result bit for bit.
 *
 * <p>TensorFlow Java's gradient of {@code GatherV2} (the C++ gradient, as
 * {@code Graph.addGradients} builds it) is dense: an {@code UnsortedSegmentSum} of the looked-up
 * rows' gradients into a zero tensor the size of the table, which {@code ApplyGradientDescent}
 * then subtracts from the table. (Python's {@code tf.gradients} hands the optimizer
 * {@code IndexedSlices} instead, and the optimizer applies them sparsely.) A step then holds a
 * second table: a [200000, 64] float table needs 49 MiB more at its update.
 *
 * <pre>{@code
 * SparseUpdates.Result r = SparseUpdates.rewrite(gd, manifest.feedShapes());
 * log.info("{} dense table updates now update only the rows looked up", r.updates());
 * }</pre>
 *
 * <p>The rewrite matches {@code ApplyGradientDescent(var, alpha, delta)} and
 * {@code ResourceApplyGradientDescent} whose {@code delta} is an {@code UnsortedSegmentSum(values,
 * ids, n)}, directly or through {@code Identity}s, {@code Reshape}s that keep the shape and
 * {@code Transpose}s that provably keep the order (the static shape is unchanged and its
 * dimensions are distinct, so only the identity permutation keeps it; the gather gradient's
 * transposes for axis 0). Each op of that chain must have no other consumer, {@code ids} must be
 * 1-D, and the sum's static shape must be fully known. The update becomes:
 *
 * <pre>
 *   unique, idx = Unique(ids)
 *   sums        = UnsortedSegmentSum(values, idx, Size(unique))   # one row per id looked up
 *   update      = ScatterSub(var, unique, sums * alpha)           # ResourceScatterSub
 * </pre>
 * under the update's name (control edges on it keep working). The dense sum is left in the graph
 * without consumers, so a step no longer runs it.
 *
 * <p>Why the losses stay bit-identical: TensorFlow's CPU {@code UnsortedSegmentSum} starts every
 * output row at zero and adds the input rows in their order, so a row's sum is the same sequence
 * of additions whether its segment is the table row or the row's position among the unique ids;
 * {@code ApplyGradientDescent} computes {@code var - delta * alpha} element by element, as
 * {@code var - (sums * alpha)} does; a row no id touched loses {@code 0 * alpha}, which leaves it
 * as it was (the one difference: with a negative learning rate, a {@code -0.0} weight of an
 * untouched row would become {@code +0.0}, which computes the same). Tested against the original
 * graph with many repeated ids. Only plain gradient descent qualifies: momentum, Adam and the
 * others change every row of their slots at every step, so a sparse update would change the
 * math.
 *
 * <p>The input is not changed. Run it before LMS, on the graph as built.
 */
public final class SparseUpdates {
  private static final Logger LOG = LoggerFactory.getLogger(SparseUpdates.class);

  /** Prefix of the nodes the rewrite adds. */
  public static final String PREFIX = "lms4j/sparse_update/";

  private SparseUpdates() {}

  /**
   * What the rewrite did.
   *
   * @param graphDef the rewritten graph (the input itself when nothing matched)
   * @param updates  the names of the updates that now update only the rows looked up
   * @param bytes    the bytes of the dense gradients a step no longer computes
   */
  public record Result(GraphDef graphDef, List<String> updates, long bytes) {
    /** Whether the graph changed. */
    public boolean changed() {
      return !updates.isEmpty();
    }
  }

  /** A matched update: the update node, the dense sum and the chain between them. */
  private record Match(NodeDef update, NodeDef sum, List<NodeDef> chain) {}

  /**
   * Rewrites every matching update.
   *
   * @param gd         the graph
   * @param feedShapes static shapes of placeholders, by name (may be empty)
   * @return the result
   * @throws IllegalArgumentException when TensorFlow cannot import the graph
   */
  public static Result rewrite(GraphDef gd, Map<String, long[]> feedShapes) {
    Map<String, NodeDef> byName = new HashMap<>();
    Map<String, Integer> consumers = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      byName.put(n.getName(), n);
      for (String in : n.getInputList()) {
        if (!in.startsWith("^")) {
          consumers.merge(GraphImporter.opName(in), 1, Integer::sum);
        }
      }
    }
    List<Match> candidates = new ArrayList<>();
    for (NodeDef n : gd.getNodeList()) {
      if ((n.getOp().equals("ApplyGradientDescent")
          || n.getOp().equals("ResourceApplyGradientDescent")) && n.getInputCount() >= 3
          && !n.getName().startsWith("lms4j/")) {
        Match m = chain(n, byName, consumers);
        if (m != null) {
          candidates.add(m);
        }
      }
    }
    if (candidates.isEmpty()) {
      return new Result(gd, List.of(), 0);
    }
    List<Match> matches = new ArrayList<>();
    long bytes = 0;
    try (Graph g = new Graph()) {
      try {
        NativeSwap.ensureLoadedFor(gd);
        g.importGraphDef(GraphImporter.withFeedShapes(gd, feedShapes));
      } catch (RuntimeException e) {
        throw new IllegalArgumentException("TensorFlow cannot import the GraphDef: "
            + e.getMessage(), e);
      }
      for (Match m : candidates) {
        long b = shapesAgree(g, m);
        if (b > 0) {
          matches.add(m);
          bytes += b;
        }
      }
    }
    if (matches.isEmpty()) {
      return new Result(gd, List.of(), 0);
    }
    Map<String, NodeDef> out = new LinkedHashMap<>();
    gd.getNodeList().forEach(n -> out.put(n.getName(), n));
    List<NodeDef> added = new ArrayList<>();
    List<String> names = new ArrayList<>();
    for (Match m : matches) {
      NodeDef u = m.update();
      NodeDef sum = m.sum();
      String p = PREFIX + u.getName() + "/";
      AttrValue tIds = sum.getAttrOrDefault("Tindices",
          AttrValue.newBuilder().setType(DataType.DT_INT32).build());
      AttrValue t = u.getAttrOrThrow("T");
      AttrValue i32 = AttrValue.newBuilder().setType(DataType.DT_INT32).build();
      String dev = u.getDevice();
      added.add(NodeDef.newBuilder().setName(p + "unique").setOp("Unique").setDevice(dev)
          .addInput(sum.getInput(1)).putAttr("T", tIds).putAttr("out_idx", tIds).build());
      added.add(NodeDef.newBuilder().setName(p + "count").setOp("Size").setDevice(dev)
          .addInput(p + "unique").putAttr("T", tIds).putAttr("out_type", i32).build());
      added.add(NodeDef.newBuilder().setName(p + "sums").setOp("UnsortedSegmentSum")
          .setDevice(dev).addInput(sum.getInput(0)).addInput(p + "unique:1")
          .addInput(p + "count").putAttr("T", t).putAttr("Tindices", tIds)
          .putAttr("Tnumsegments", i32).build());
      added.add(NodeDef.newBuilder().setName(p + "step").setOp("Mul").setDevice(dev)
          .addInput(p + "sums").addInput(u.getInput(1)).putAttr("T", t).build());
      boolean resource = u.getOp().equals("ResourceApplyGradientDescent");
      NodeDef.Builder s = NodeDef.newBuilder().setName(u.getName())
          .setOp(resource ? "ResourceScatterSub" : "ScatterSub").setDevice(dev)
          .addInput(u.getInput(0)).addInput(p + "unique").addInput(p + "step")
          .putAttr(resource ? "dtype" : "T", t).putAttr("Tindices", tIds);
      if (!resource) {
        s.putAttr("use_locking", u.getAttrOrDefault("use_locking",
            AttrValue.newBuilder().setB(false).build()));
      }
      for (String in : u.getInputList()) {
        if (in.startsWith("^")) {
          s.addInput(in);
        }
      }
      u.getAttrMap().forEach((k, v) -> {
        if (k.startsWith("_")) {
          s.putAttr(k, v);
        }
      });
      out.put(u.getName(), s.build());
      names.add(u.getName());
    }
    GraphDef.Builder b = gd.toBuilder().clearNode();
    out.values().forEach(b::addNode);
    added.forEach(b::addNode);
    LOG.debug("{} dense gradient-descent updates of gathered tables made sparse: {}",
        names.size(), names);
    return new Result(b.build(), List.copyOf(names), bytes);
  }

  /** The chain from {@code u}'s delta back to a dense {@code UnsortedSegmentSum}, or null. */
  private static Match chain(NodeDef u, Map<String, NodeDef> byName,
      Map<String, Integer> consumers) {
    List<NodeDef> chain = new ArrayList<>();
    String in = u.getInput(2);
    while (true) {
      if (in.startsWith("^") || port(in) != 0) {
        return null;
      }
      NodeDef n = byName.get(GraphImporter.opName(in));
      if (n == null || consumers.getOrDefault(n.getName(), 0) != 1) {
        return null;
      }
      switch (n.getOp()) {
        case "UnsortedSegmentSum" -> {
          return n.getInputCount() >= 3 ? new Match(u, n, chain) : null;
        }
        case "Identity", "Reshape", "Transpose" -> {
          chain.add(n);
          in = n.getInput(0);
        }
        default -> {
          return null;
        }
      }
    }
  }

  /**
   * The bytes of the dense sum when the static shapes show the chain keeps the sum as it is and
   * the ids are 1-D; 0 otherwise.
   */
  private static long shapesAgree(Graph g, Match m) {
    Shape sum = shape(g, m.sum().getName(), 0);
    if (sum == null || sum.isUnknown() || sum.hasUnknownDimension() || sum.numDimensions() < 1) {
      return 0;
    }
    Shape ids = shape(g, GraphImporter.opName(m.sum().getInput(1)), port(m.sum().getInput(1)));
    if (ids == null || ids.isUnknown() || ids.numDimensions() != 1) {
      return 0;
    }
    for (NodeDef c : m.chain()) {
      Shape s = shape(g, c.getName(), 0);
      if (s == null || !s.equals(sum)) {
        return 0;
      }
      if (c.getOp().equals("Transpose") && !distinct(sum)) {
        return 0;
      }
    }
    long elements = sum.size();
    GraphOperation op = g.operation(m.sum().getName());
    return elements * GraphImporter.dtypeSize(op.output(0).dataType());
  }

  private static boolean distinct(Shape s) {
    for (int i = 0; i < s.numDimensions(); i++) {
      for (int j = i + 1; j < s.numDimensions(); j++) {
        if (s.size(i) == s.size(j)) {
          return false;
        }
      }
    }
    return true;
  }

  private static Shape shape(Graph g, String node, int port) {
    GraphOperation op = g.operation(node);
    return op == null || port >= op.numOutputs() ? null : op.output(port).shape();
  }

  private static int port(String tensor) {
    int c = tensor.lastIndexOf(':');
    return c < 0 ? 0 : Integer.parseInt(tensor.substring(c + 1));
  }
}
