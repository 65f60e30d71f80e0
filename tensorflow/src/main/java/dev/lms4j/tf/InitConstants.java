package dev.lms4j.tf;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.IntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;

/**
 * Keeps grappler from folding large initializer {@code Fill}s into constants that TensorFlow
 * holds for the whole session.
 *
 * <p>A zero-initialised variable (an optimizer slot, a bias; Python's {@code tf.zeros} of a large
 * shape) is assigned {@code Fill(Const dims, Const value)}. Grappler's constant folding turns
 * that Fill into one {@code Const} of the full shape (a uniform tensor encodes in a few bytes, so
 * its size limit does not stop it); the executor of the {@code init} run materializes the
 * constant when it is built, and {@code DirectSession} keeps that executor, with the constant,
 * cached for the session's life. Every training step then has that much less memory. Measured
 * here (two training steps, bisected at 1 MiB): LeNet (batch 100, momentum; a 12.25 MiB slot)
 * traced peak 91.8 -> 79.8 MiB, smallest budget that trains 101 -> 95 MiB (a convolution
 * gradient's 21.5 MiB scratch sets the rest); a sparsely updated 16 MiB embedding table filled
 * with 0.01 ({@code ProbeGraphs.sparseTable}) 32.1 -> 16.1 MiB traced, 34 -> 18 MiB.
 *
 * <p>This rewrite routes the Fill's value through a {@code PlaceholderWithDefault} of the same
 * Const, which constant folding does not fold through: the Fill then runs once, inside
 * {@code init}, and its output is freed (or becomes the variable) when the assignment is done.
 * The values are the same, so the math is unchanged (losses bit-identical, tested).
 *
 * <pre>{@code
 * InitConstants.Result r = InitConstants.rewrite(graphDef, manifest.runOps());
 * log.info("{} initializer Fills ({} MiB) no longer folded", r.fills().size(), r.bytes() >> 20);
 * }</pre>
 *
 * <p>Only Fills that initialise a variable (ancestors of an {@code Assign} or
 * {@code AssignVariableOp}) and that a training step does not run (not ancestors of the run ops
 * through data or control edges) are rewritten, whose dims and value are {@code Const} nodes,
 * whose size is known from the dims and more than 10 MiB ({@link #MIN_BYTES}). With no run ops
 * (the step unknown) the graph is left alone. The rewrite is idempotent: a rewritten Fill's value
 * is no longer a Const.
 *
 * <p>{@code ZerosLike} and {@code OnesLike} outside the step whose input has a fully known static
 * shape are folded and held the same way (measured: a 16 MiB slot initialised by
 * {@code ZerosLike} of its weight's random initial value raised the traced step peak by 16 MiB,
 * as the Fill did). Those of a float, double, int32 or int64 type and of more than 10 MiB
 * ({@link #MIN_BYTES}) become a {@code Fill} of the same name: dims {@code <op>/lms_dims}
 * (int64), value {@code <op>/lms_value} through {@code <op>/lms_nofold}, with a control edge on
 * the input's op, which the original waited for (its value is not read, as folding did not read
 * it).
 */
public final class InitConstants {
  private static final Logger LOG = LoggerFactory.getLogger(InitConstants.class);

  /**
   * Fills of at most this size are left: 10 MiB. TensorFlow's graph optimizer folds results up
   * to 10 MiB even through the {@code PlaceholderWithDefault} this class puts in (measured: a
   * 640 KiB Fill so rewired was still held; {@link InitHeldConstants}), so only larger ones,
   * which grappler alone folds, are kept from folding by it.
   */
  public static final long MIN_BYTES = InitHeldConstants.MAX_FOLDED_BYTES + 1;

  /** The suffix of the inserted {@code PlaceholderWithDefault}: {@code <fill>/lms_nofold}. */
  public static final String SUFFIX = "/lms_nofold";

  /** The ops that give a variable its initial value. */
  private static final Set<String> ASSIGNS = Set.of("Assign", "AssignVariableOp");

  /** The ops grappler materializes from a fully known input shape. */
  private static final Set<String> LIKE = Set.of("ZerosLike", "OnesLike");

  /** Scalar Consts of the value types a ZerosLike/OnesLike is rewritten for. */
  private static final Map<DataType, IntFunction<TensorProto>> VALUES = Map.of(
      DataType.DT_FLOAT, v -> scalar(DataType.DT_FLOAT).addFloatVal(v).build(),
      DataType.DT_DOUBLE, v -> scalar(DataType.DT_DOUBLE).addDoubleVal(v).build(),
      DataType.DT_INT32, v -> scalar(DataType.DT_INT32).addIntVal(v).build(),
      DataType.DT_INT64, v -> scalar(DataType.DT_INT64).addInt64Val(v).build());

  private InitConstants() {}

  private static TensorProto.Builder scalar(DataType t) {
    return TensorProto.newBuilder().setDtype(t)
        .setTensorShape(TensorShapeProto.getDefaultInstance());
  }

  /**
   * The rewritten graph and the Fills it changed.
   *
   * @param graphDef the rewritten graph (the input itself when nothing changed)
   * @param fills    the names of the Fills whose value now comes through a
   *                 {@code PlaceholderWithDefault}, in graph order
   * @param bytes    the Fills' output bytes together
   * @param sizes    each Fill's output bytes, by name, in graph order
   */
  public record Result(GraphDef graphDef, List<String> fills, long bytes, Map<String, Long> sizes) {
    /**
     * Copies the list and the map.
     *
     * @param graphDef the rewritten graph
     * @param fills    the Fills changed
     * @param bytes    their output bytes
     * @param sizes    each one's output bytes
     */
    public Result {
      Objects.requireNonNull(graphDef, "graphDef");
      fills = List.copyOf(fills);
      sizes = java.util.Collections.unmodifiableMap(new java.util.LinkedHashMap<>(sizes));
    }

    /**
     * Whether any Fill was changed.
     *
     * @return true when the graph was rewritten
     */
    public boolean changed() {
      return !fills.isEmpty();
    }
  }

  /**
   * Rewrites the large initializer Fills of {@code gd} that a step does not run.
   *
   * @param gd     the graph (not changed)
   * @param runOps what a step fetches and runs (tensor or op names; {@code ^name} and
   *               {@code name:k} accepted); empty: the step is unknown and nothing changes
   * @return the rewritten graph, the Fills changed and their bytes
   * @throws IllegalArgumentException when a run op, or an input of an op it depends on, is not
   *     in the graph
   */
  public static Result rewrite(GraphDef gd, Collection<String> runOps) {
    Objects.requireNonNull(gd, "gd");
    if (runOps.isEmpty()) {
      return new Result(gd, List.of(), 0, Map.of());
    }
    List<NodeDef> nodes = gd.getNodeList();
    Map<String, Integer> index = new HashMap<>();
    for (int i = 0; i < nodes.size(); i++) {
      index.put(nodes.get(i).getName(), i);
    }
    Set<String> init = initializers(gd, GraphImporter.ancestors(gd, new HashSet<>(runOps)));
    GraphDef.Builder out = null;
    List<String> fills = new ArrayList<>();
    Map<String, Long> sizes = new java.util.LinkedHashMap<>();
    long bytes = 0;
    Map<String, long[]> shapes = likeShapes(gd, nodes, init);
    for (int i = 0; i < nodes.size(); i++) {
      NodeDef fill = nodes.get(i);
      if (LIKE.contains(fill.getOp()) && init.contains(fill.getName())) {
        if (out == null) {
          out = gd.toBuilder();
        }
        long size = like(out, i, fill, shapes.get(fill.getName()), index);
        if (size > 0) {
          fills.add(fill.getName());
          sizes.put(fill.getName(), size);
          bytes += size;
        }
        continue;
      }
      if (!"Fill".equals(fill.getOp()) || !init.contains(fill.getName())
          || fill.getInputCount() < 2) {
        continue;
      }
      NodeDef dims = constInput(nodes, index, fill.getInput(0));
      NodeDef value = constInput(nodes, index, fill.getInput(1));
      String nofold = fill.getName() + SUFFIX;
      if (dims == null || value == null || index.containsKey(nofold)) {
        continue;
      }
      TensorProto v = value.getAttrOrDefault("value", AttrValue.getDefaultInstance()).getTensor();
      if (v.getTensorShape().getDimCount() != 0) {
        continue;
      }
      long elements = elements(dims);
      DataType dtype = v.getDtype();
      long size = elements < 0 ? -1 : elements * GraphImporter.dtypeSize(dtype);
      if (size < MIN_BYTES) {
        continue;
      }
      if (out == null) {
        out = gd.toBuilder();
      }
      NodeDef.Builder ph = NodeDef.newBuilder().setName(nofold).setOp("PlaceholderWithDefault")
          .setDevice(fill.getDevice()).addInput(fill.getInput(1))
          .putAttr("dtype", AttrValue.newBuilder().setType(dtype).build())
          .putAttr("shape", AttrValue.newBuilder()
              .setShape(TensorShapeProto.getDefaultInstance()).build());
      out.addNode(ph);
      out.setNode(i, fill.toBuilder().setInput(1, nofold));
      fills.add(fill.getName());
      sizes.put(fill.getName(), size);
      bytes += size;
    }
    if (fills.isEmpty()) {
      return new Result(gd, List.of(), 0, Map.of());
    }
    LOG.debug("initializer Fills kept from constant folding: {}", fills);
    return new Result(out.build(), fills, bytes, sizes);
  }

  /**
   * The ops that initialise variables and a step does not run: the ancestors of the assignments
   * ({@code Assign}, {@code AssignVariableOp}) outside {@code step}. A ZerosLike that is only a
   * gradient nobody applies is outside the step too, but no run executes it, so nothing holds it.
   */
  private static Set<String> initializers(GraphDef gd, Set<String> step) {
    Set<String> assigns = new HashSet<>();
    for (NodeDef n : gd.getNodeList()) {
      if (ASSIGNS.contains(n.getOp()) && !step.contains(n.getName())) {
        assigns.add(n.getName());
      }
    }
    Set<String> init = assigns.isEmpty() ? new HashSet<>()
        : GraphImporter.ancestors(gd, assigns);
    init.removeAll(step);
    return init;
  }

  /**
   * The static output shapes of the inputs of the {@code ZerosLike}/{@code OnesLike} ops outside
   * the step, by the op's name, where TensorFlow's shape inference knows them fully (imported
   * into a {@link Graph} only when there is such an op; none when the import fails).
   */
  private static Map<String, long[]> likeShapes(GraphDef gd, List<NodeDef> nodes,
      Set<String> init) {
    Map<String, String> inputs = new HashMap<>();
    for (int i = 0; i < nodes.size(); i++) {
      NodeDef n = nodes.get(i);
      if (LIKE.contains(n.getOp()) && init.contains(n.getName()) && n.getInputCount() > 0
          && !n.getInput(0).startsWith("^") && VALUES.containsKey(dtype(n))) {
        inputs.put(n.getName(), n.getInput(0));
      }
    }
    Map<String, long[]> shapes = new HashMap<>();
    if (inputs.isEmpty()) {
      return shapes;
    }
    try (Graph g = new Graph()) {
      NativeSwap.ensureLoadedFor(gd);
      g.importGraphDef(gd);
      inputs.forEach((like, in) -> {
        int colon = in.lastIndexOf(':');
        int k = colon < 0 ? 0 : Integer.parseInt(in.substring(colon + 1));
        var op = g.operation(GraphImporter.opName(in));
        if (op == null || k >= op.numOutputs()) {
          return;
        }
        org.tensorflow.ndarray.Shape shape = op.output(k).shape();
        if (!shape.isUnknown() && !shape.hasUnknownDimension()) {
          shapes.put(like, shape.asArray());
        }
      });
    } catch (RuntimeException e) {
      LOG.debug("no static shapes for ZerosLike/OnesLike: {}", e.toString());
      shapes.clear();
    }
    return shapes;
  }

  /**
   * Replaces {@code ZerosLike}/{@code OnesLike} node {@code i} (static input shape
   * {@code shape}) by a {@code Fill} of the same name: dims a new int64 Const, the value (0 or
   * 1) a new Const through a {@code PlaceholderWithDefault}, a control edge on the input's op
   * (the original waited for it) and the node's own control inputs kept.
   *
   * @return the Fill's output bytes, or -1 when the node is left as it is
   */
  private static long like(GraphDef.Builder out, int i, NodeDef like, long[] shape,
      Map<String, Integer> index) {
    if (shape == null) {
      return -1;
    }
    DataType dtype = dtype(like);
    long size;
    try {
      long elements = 1;
      for (long d : shape) {
        elements = Math.multiplyExact(elements, d);
      }
      size = Math.multiplyExact(elements, GraphImporter.dtypeSize(dtype));
    } catch (ArithmeticException e) {
      return -1;
    }
    String name = like.getName();
    String dimsName = name + "/lms_dims";
    String valueName = name + "/lms_value";
    String nofold = name + SUFFIX;
    if (size < MIN_BYTES || index.containsKey(dimsName) || index.containsKey(valueName)
        || index.containsKey(nofold)) {
      return -1;
    }
    TensorProto.Builder dims = TensorProto.newBuilder().setDtype(DataType.DT_INT64)
        .setTensorShape(TensorShapeProto.newBuilder().addDim(
            TensorShapeProto.Dim.newBuilder().setSize(shape.length)));
    for (long d : shape) {
      dims.addInt64Val(d);
    }
    TensorProto value = VALUES.get(dtype).apply("OnesLike".equals(like.getOp()) ? 1 : 0);
    out.addNode(constant(dimsName, like.getDevice(), dims.build()));
    out.addNode(constant(valueName, like.getDevice(), value));
    out.addNode(NodeDef.newBuilder().setName(nofold).setOp("PlaceholderWithDefault")
        .setDevice(like.getDevice()).addInput(valueName)
        .putAttr("dtype", AttrValue.newBuilder().setType(dtype).build())
        .putAttr("shape", AttrValue.newBuilder()
            .setShape(TensorShapeProto.getDefaultInstance()).build()));
    NodeDef.Builder fill = NodeDef.newBuilder().setName(name).setOp("Fill")
        .setDevice(like.getDevice()).addInput(dimsName).addInput(nofold)
        .addInput("^" + GraphImporter.opName(like.getInput(0)))
        .putAttr("T", AttrValue.newBuilder().setType(dtype).build())
        .putAttr("index_type", AttrValue.newBuilder().setType(DataType.DT_INT64).build());
    for (String in : like.getInputList()) {
      if (in.startsWith("^") && !in.equals("^" + GraphImporter.opName(like.getInput(0)))) {
        fill.addInput(in);
      }
    }
    out.setNode(i, fill);
    return size;
  }

  private static NodeDef constant(String name, String device, TensorProto t) {
    return NodeDef.newBuilder().setName(name).setOp("Const").setDevice(device)
        .putAttr("dtype", AttrValue.newBuilder().setType(t.getDtype()).build())
        .putAttr("value", AttrValue.newBuilder().setTensor(t).build()).build();
  }

  /** The element type of a ZerosLike/OnesLike ({@code T}). */
  private static DataType dtype(NodeDef n) {
    return n.getAttrOrDefault("T", AttrValue.getDefaultInstance()).getType();
  }

  /** The Const node behind a data input (its output 0), or null. */
  private static NodeDef constInput(List<NodeDef> nodes, Map<String, Integer> index, String in) {
    if (in.startsWith("^")) {
      return null;
    }
    int colon = in.lastIndexOf(':');
    if (colon >= 0 && !in.substring(colon + 1).equals("0")) {
      return null;
    }
    Integer id = index.get(GraphImporter.opName(in));
    if (id == null || !"Const".equals(nodes.get(id).getOp())) {
      return null;
    }
    return nodes.get(id);
  }

  /**
   * The element count a dims Const describes: the product of its int32 or int64 values, read
   * from {@code int_val}/{@code int64_val} (a shorter list repeats its last value, as TensorFlow
   * reads it) or from {@code tensor_content}; -1 when it cannot be read (not a vector, another
   * dtype, a negative dimension, an overflow).
   */
  static long elements(NodeDef dims) {
    TensorProto t = dims.getAttrOrDefault("value", AttrValue.getDefaultInstance()).getTensor();
    TensorShapeProto shape = t.getTensorShape();
    if (shape.getDimCount() != 1) {
      return -1;
    }
    long rank = shape.getDim(0).getSize();
    if (rank < 0 || rank > 64) {
      return -1;
    }
    long[] values = new long[(int) rank];
    if (!t.getTensorContent().isEmpty()) {
      ByteBuffer b = t.getTensorContent().asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
      int width = t.getDtype() == DataType.DT_INT32 ? 4 : t.getDtype() == DataType.DT_INT64 ? 8
          : 0;
      if (width == 0 || b.remaining() != rank * width) {
        return -1;
      }
      for (int i = 0; i < rank; i++) {
        values[i] = width == 4 ? b.getInt() : b.getLong();
      }
    } else {
      List<? extends Number> list = switch (t.getDtype()) {
        case DT_INT32 -> t.getIntValList();
        case DT_INT64 -> t.getInt64ValList();
        default -> null;
      };
      if (list == null || (list.isEmpty() && rank > 0) || list.size() > rank) {
        return -1;
      }
      for (int i = 0; i < rank; i++) {
        values[i] = list.get(Math.min(i, list.size() - 1)).longValue();
      }
    }
    long n = 1;
    for (long d : values) {
      if (d < 0) {
        return -1;
      }
      try {
        n = Math.multiplyExact(n, d);
      } catch (ArithmeticException e) {
        return -1;
      }
    }
    return n;
  }
}
