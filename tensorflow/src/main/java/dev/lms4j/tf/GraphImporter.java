package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.GrapplerShapes;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Reassociation;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.BfcReplay;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.GraphOperation;
import org.tensorflow.Output;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorShapeProto;

/**
 * Turns a TensorFlow GraphDef into lms4j's graph model, with static shapes from TensorFlow's shape
 * inference (the GraphDef is imported into a scratch {@link Graph}).
 *
 * <p>The first unknown dimension of a shape is the batch size. Feed shapes (from a manifest) are
 * set on the placeholders before shape inference, so they propagate. The batch size is
 * {@code batchSize} when given, else the first dimension of the placeholders; a placeholder whose
 * first dimension is unknown then is an error. Later unknown dimensions of a shape count as 1.
 *
 * <p>Resource variables are sized as their data, not their handle ({@link ResourceVariables}):
 * a {@code VarHandleOp}'s output holds the variable's bytes (persistent, like a
 * {@code VariableV2}), and a {@code ReadVariableOp} aliases the variable's buffer, unless an
 * update of the variable may run while the read is still alive (copy-on-write).
 */
public final class GraphImporter {
  private static final Logger LOG = LoggerFactory.getLogger(GraphImporter.class);
  /** Default name scope of gradient ops ({@code Graph.addGradients} and Python's tf.gradients). */
  public static final String DEFAULT_BACKWARD_SCOPE = "gradients";

  private GraphImporter() {}

  /**
   * Imports a GraphDef.
   *
   * @param gd            the graph
   * @param feedShapes    static shapes for placeholders, by op name (may be empty)
   * @param batchSize     value for unknown first dimensions, or -1 when it must be inferred
   * @param backwardScope name scope of gradient ops
   * @throws IllegalArgumentException when TensorFlow rejects the graph, or a dimension stays
   *                                  unknown and no batch size was given
   */
  public static DataflowGraph importGraph(GraphDef gd, Map<String, long[]> feedShapes,
      int batchSize, String backwardScope) {
    return importGraph(gd, feedShapes, batchSize, backwardScope, java.util.Set.of());
  }

  /**
   * As {@link #importGraph(GraphDef, Map, int, String)}, keeping only the ops a step runs: the
   * ancestors (through data and control edges) of {@code runOps}, e.g. the loss and the train op.
   * TensorFlow prunes the rest (the init subgraph, gradients nobody applies) before it runs.
   * The constants the init run leaves folded and held for the session
   * ({@link InitHeldConstants}) are added as ops of type {@link BfcReplay#HELD} without inputs,
   * under the initializer's name, with a persistent output, resident for every step: the
   * allocator replay allocates them before the step. An empty {@code runOps} keeps every op.
   *
   * <p>The graphs made lately are kept ({@link ImportCache}): importing the same GraphDef again
   * with the same arguments returns the same (immutable) graph model.
   *
   * <p>The graph's kernels reuse buffers as TensorFlow's do
   * ({@link DataflowGraph#inPlaceReuse()}), and its feeds live in host memory
   * ({@link DataflowGraph#hostFeeds()}) unless an op is placed on a GPU: TensorFlow's CPU
   * device reads fed tensors where the caller allocated them, outside its budgeted allocator.
   *
   * <p>Where {@code runOps} are given, products are grouped as grappler's arithmetic optimizer
   * will group them ({@link Reassociation}, exact groups; ops merged into identical ones read
   * those): the model is the graph TensorFlow runs.
   */
  public static DataflowGraph importGraph(GraphDef gd, Map<String, long[]> feedShapes,
      int batchSize, String backwardScope, java.util.Set<String> runOps) {
    return ImportCache.get(ImportCache.key(true, gd, feedShapes, batchSize, backwardScope,
        runOps), () -> {
          DataflowGraph g = importAsWritten(gd, feedShapes, batchSize, backwardScope, runOps);
          // only where the ops a step fetches are known: grappler never absorbs a fetched op
          return runOps.isEmpty() ? g
              : Reassociation.regroup(g, preserved(runOps), ProductGroups.tagged(gd));
        });
  }

  /** The op names of {@code runOps} (tensor or op names): what grappler must not rewrite. */
  static java.util.Set<String> preserved(java.util.Set<String> runOps) {
    java.util.Set<String> s = new java.util.HashSet<>();
    for (String r : runOps) {
      s.add(opName(r));
    }
    return s;
  }

  /**
   * As {@link #importGraph(GraphDef, Map, int, String, java.util.Set)}, with the products as the
   * GraphDef has them (not grouped as grappler will group them).
   */
  static DataflowGraph importAsWritten(GraphDef gd, Map<String, long[]> feedShapes,
      int batchSize, String backwardScope, java.util.Set<String> runOps) {
    return ImportCache.get(ImportCache.key(false, gd, feedShapes, batchSize, backwardScope,
        runOps), () -> importNow(gd, feedShapes, batchSize, backwardScope, runOps));
  }

  private static DataflowGraph importNow(GraphDef gd, Map<String, long[]> feedShapes,
      int batchSize, String backwardScope, java.util.Set<String> runOps) {
    GraphDef shaped = withFeedShapes(gd, feedShapes);
    java.util.Set<String> keep = runOps.isEmpty() ? null : ancestors(shaped, runOps);
    boolean gpu = shaped.getNodeList().stream()
        .anyMatch(n -> n.getDevice().toUpperCase(java.util.Locale.ROOT).contains("GPU"));
    DataflowGraphBuilder b = DataflowGraph.builder().inPlaceReuse(true).hostFeeds(!gpu);
    try (Graph g = new Graph()) {
      try {
        NativeSwap.ensureLoadedFor(shaped);
        g.importGraphDef(shaped);
      } catch (RuntimeException e) {
        throw new IllegalArgumentException("TensorFlow cannot import the GraphDef: "
            + e.getMessage(), e);
      }
      String prefix = backwardScope.endsWith("/") ? backwardScope : backwardScope + "/";
      if (batchSize < 0) {
        batchSize = inferBatch(g, shaped);
      }
      b.grapplerShapes(grapplerShapes(shaped, keep));
      ResourceVariables resources = ResourceVariables.of(shaped, keep);
      java.util.Set<String> afterUpdates = afterUpdates(shaped, keep, prefix);
      for (NodeDef n : shaped.getNodeList()) {
        if (keep != null && !keep.contains(n.getName())) {
          continue;
        }
        GraphOperation op = g.operation(n.getName());
        List<Tensor> outs = new ArrayList<>();
        for (int i = 0; i < op.numOutputs(); i++) {
          outs.add(resources.adjust(n, i, tensor(op, i, batchSize)));
        }
        if (NativeSwap.SWAP_OUT.equals(n.getOp()) || NativeSwap.SWAP_OUT_ASYNC.equals(n.getOp())) {
          // a native swap-out's output is its host copy, outside TensorFlow's allocator, as the
          // plan's model has it: a rewritten graph imported again predicts what its plan did
          Tensor host = outs.get(0);
          outs.set(0, new Tensor(host.dtype(), host.shape(), 0, false));
        }
        if (n.getOp().equals("BroadcastGradientArgs") && op.numInputs() == 2) {
          broadcastArgs(op, batchSize, outs);
        }
        List<String> inputs = n.getInputList();
        if (n.containsAttr(SlotOffload.SHAPE_ATTR)) {
          // an offloaded slot's parse: TensorFlow infers no shape for it
          outs.set(0, sized(n.getAttrOrThrow(SlotOffload.SHAPE_ATTR).getShape(),
              n.getAttrOrThrow("out_type").getType()));
        }
        if (n.containsAttr(SlotOffload.HOLDS_ATTR)) {
          // the slot holds the parse's buffer until its free runs (through the variable, which
          // the model does not follow): the model reads it there
          inputs = new ArrayList<>(inputs);
          inputs.add(n.getAttrOrThrow(SlotOffload.HOLDS_ATTR).getS().toStringUtf8());
        }
        b.op(n.getName(), modelType(n.getOp()), afterUpdates.contains(n.getName())
            ? OpCategory.OPTIMIZER : category(n, prefix), n.getDevice(), inputs, outs);
        if (n.getOp().equals("Einsum") && n.containsAttr("equation") && op.numInputs() == 2) {
          // the transposed copies the kernel makes beside its output (EinsumTemps)
          long temps = EinsumTemps.bytes(n.getAttrOrThrow("equation").getS().toStringUtf8(),
              List.of(op.input(0).shape().asArray(), op.input(1).shape().asArray()),
              outs.get(0));
          if (temps > 0) {
            b.scratch(n.getName(), temps);
          }
        }
      }
      for (String r : runOps) {
        // what a step fetches (the loss by tensor or op name; a target op's outputs, if it has
        // any, counted too: a NoOp has none, an update's ref output is the variable)
        if (b.has(opName(r)) && (r.contains(":") || g.operation(opName(r)).numOutputs() > 0)) {
          b.fetch(r);
        }
      }
      // oneDNN merges a bias gradient into a filter gradient: the merged op makes it once all of
      // the filter gradient's inputs are there, so the model orders it after that op (a plan
      // that ordered it before could make a cycle TensorFlow skips without an error)
      for (Map.Entry<String, String> m : UnchainedOps.merges(shaped).entrySet()) {
        if (b.has(m.getKey()) && b.has(m.getValue())
            && !ancestors(shaped, java.util.Set.of(m.getValue())).contains(m.getKey())) {
          b.controlEdge(m.getValue(), m.getKey());
        }
      }
      if (keep != null) {
        // what init leaves folded and held for the session: resident for every step
        InitHeldConstants.Held held = InitHeldConstants.find(shaped.getNodeList(), keep,
            g::operation);
        held.bytes().forEach((name, bytes) ->
            b.op(name, BfcReplay.HELD, OpCategory.FORWARD, List.of(),
                Tensor.persistent(bytes)));
        // resource variables init assigns one of them to share its buffer until updated
        java.util.Set<String> shared = new java.util.LinkedHashSet<>(held.shared());
        shared.removeIf(name -> !b.has(name));
        b.initShared(shared);
      }
    }
    return b.build();
  }

  /**
   * The model's op type for a GraphDef op type: lms4j's native swap ops become the model's own
   * swap types ({@link OpTypes#SWAP_OUT}, {@link OpTypes#SWAP_IN}), as the plan's model has
   * them, so the cost model prices them as transfers and the memory timeline marks them; every
   * other type is kept.
   */
  static String modelType(String graphType) {
    return switch (graphType) {
      case NativeSwap.SWAP_OUT, NativeSwap.SWAP_OUT_ASYNC, NativeSwap.SWAP_OUT_DISK ->
          OpTypes.SWAP_OUT;
      case NativeSwap.SWAP_IN, NativeSwap.SWAP_IN_DISK -> OpTypes.SWAP_IN;
      default -> graphType;
    };
  }

  /**
   * The ops {@code roots} (tensor or op names) depend on, themselves included, through data and
   * control inputs.
   *
   * @throws IllegalArgumentException when a root or an input names a missing node
   */
  static java.util.Set<String> ancestors(GraphDef gd, java.util.Set<String> roots) {
    Map<String, NodeDef> byName = new java.util.HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      byName.put(n.getName(), n);
    }
    java.util.Set<String> seen = new java.util.HashSet<>();
    java.util.ArrayDeque<String> todo = new java.util.ArrayDeque<>();
    for (String r : roots) {
      String op = opName(r);
      if (!byName.containsKey(op)) {
        throw new IllegalArgumentException("the graph has no op named '" + op + "'");
      }
      todo.add(op);
    }
    while (!todo.isEmpty()) {
      String v = todo.poll();
      if (seen.add(v)) {
        for (String in : byName.get(v).getInputList()) {
          if (!byName.containsKey(opName(in))) {
            throw new IllegalArgumentException("the graph's node '" + v + "' reads '" + in
                + "', but the graph has no node named '" + opName(in) + "'");
          }
          todo.add(opName(in));
        }
      }
    }
    return seen;
  }

  /** The op name of an input reference ({@code ^op}, {@code op}, {@code op:1}). */
  static String opName(String ref) {
    String s = ref.startsWith("^") ? ref.substring(1) : ref;
    int colon = s.lastIndexOf(':');
    return colon < 0 ? s : s.substring(0, colon);
  }

  /**
   * The batch size from the placeholders' static shapes: the first dimension of the first
   * placeholder of rank >= 1; 1 when there is none.
   *
   * @throws IllegalArgumentException when a placeholder's first dimension is unknown
   */
  private static int inferBatch(Graph g, GraphDef gd) {
    int batch = -1;
    for (NodeDef n : gd.getNodeList()) {
      if (!n.getOp().equals("Placeholder")) {
        continue;
      }
      var shape = g.operation(n.getName()).output(0).shape();
      if (shape.isUnknown() || shape.numDimensions() == 0) {
        continue;
      }
      long d = shape.size(0);
      if (d < 0) {
        throw new IllegalArgumentException("placeholder " + n.getName() + " has an unknown "
            + "batch dimension " + shape + ": give the batch size (--batch, SwapParams.batchSize, "
            + "or full feed shapes in the manifest)");
      }
      if (batch < 0) {
        batch = (int) d;
      }
    }
    return batch < 0 ? 1 : batch;
  }

  /**
   * The ops of the step (of {@code keep}, all when null) that run after a variable update: those
   * a data or control edge orders after an op of category {@link OpCategory#OPTIMIZER}. They
   * are not of the forward pass whatever their scope: an exponential moving average of the
   * weights ({@code shadow -= (shadow - w) * 0.01} under the optimizer's control dependencies)
   * reads each weight after its update, and a clone of it (which a recompute planner would
   * order before the update, as it does a forward read of the weight) would read the value
   * before it. Measured on the corpus cnn-recipe: the grappler-style recompute planner picked
   * such a {@code Sub} and {@code Mul}, and the clone's edge to the update and the update's to
   * the clone made a cycle.
   */
  static java.util.Set<String> afterUpdates(GraphDef gd, java.util.Set<String> keep,
      String backwardPrefix) {
    Map<String, List<String>> consumers = new java.util.HashMap<>();
    java.util.ArrayDeque<String> todo = new java.util.ArrayDeque<>();
    for (NodeDef n : gd.getNodeList()) {
      if (keep != null && !keep.contains(n.getName())) {
        continue;
      }
      for (String in : n.getInputList()) {
        consumers.computeIfAbsent(opName(in), k -> new ArrayList<>()).add(n.getName());
      }
      if (category(n, backwardPrefix) == OpCategory.OPTIMIZER) {
        todo.add(n.getName());
      }
    }
    java.util.Set<String> after = new java.util.HashSet<>();
    while (!todo.isEmpty()) {
      for (String c : consumers.getOrDefault(todo.poll(), List.of())) {
        if (after.add(c)) {
          todo.add(c);
        }
      }
    }
    return after;
  }

  /** The category of a node: gradient ops by scope, variable updates by type. */
  static OpCategory category(NodeDef n, String backwardPrefix) {
    String t = n.getOp();
    if (t.startsWith("Apply") || t.startsWith("ResourceApply") || t.startsWith("Assign")
        || t.startsWith("ScatterUpdate")) {
      return OpCategory.OPTIMIZER;
    }
    if (n.getName().startsWith(backwardPrefix)) {
      return OpCategory.BACKWARD;
    }
    return OpCategory.FORWARD;
  }

  private static Tensor tensor(GraphOperation op, int i, int batchSize) {
    Output<?> out = op.output(i);
    DataType dt = out.dataType();
    boolean ref = dt.getNumber() > 100;
    int base = ref ? dt.getNumber() - 100 : dt.getNumber();
    DataType baseType = DataType.forNumber(base);
    String dtype = dtypeName(baseType);
    boolean unknownRank = out.shape().isUnknown();
    long[] dims = dims(out, batchSize);
    long elems = 1;
    for (long d : dims) {
      elems *= d;
    }
    long bytes = unknownRank ? 0 : elems * dtypeSize(baseType);
    boolean persistent = ref || OpTypes.VARIABLES.contains(op.type())
        || baseType == DataType.DT_RESOURCE;
    return new Tensor(dtype, dims, bytes, persistent);
  }

  /**
   * What grappler's shape inference knows of {@code gd}'s ops (among {@code keep}; null: all),
   * {@link GrapplerShapes}: it takes a fed tensor's shape as unknown ({@code GraphProperties}
   * without valid feeds), so the shapes are inferred again, by TensorFlow's own shape functions,
   * on a copy of the graph whose feeds have no shape. The shape reads whose input that leaves
   * unsized (a {@code Rank} needs only the rank), and the tensors whose shape it leaves unknown.
   * Null (not known) where that copy does not import.
   */
  static GrapplerShapes grapplerShapes(GraphDef gd, java.util.Set<String> keep) {
    GraphDef.Builder view = gd.toBuilder();
    for (int i = 0; i < view.getNodeCount(); i++) {
      NodeDef n = view.getNode(i);
      if (OpTypes.FEEDS.contains(n.getOp())) {
        view.setNode(i, n.toBuilder().putAttr("shape", AttrValue.newBuilder()
            .setShape(TensorShapeProto.newBuilder().setUnknownRank(true)).build()));
      }
    }
    java.util.Set<String> dynamic = new java.util.HashSet<>();
    java.util.Set<String> unknownShape = new java.util.HashSet<>();
    try (Graph g = new Graph()) {
      g.importGraphDef(view.build());
      for (NodeDef n : gd.getNodeList()) {
        if (keep != null && !keep.contains(n.getName())) {
          continue;
        }
        GraphOperation op = g.operation(n.getName());
        for (int i = 0; i < op.numOutputs(); i++) {
          org.tensorflow.ndarray.Shape s = op.output(i).shape();
          if (s.isUnknown() || s.hasUnknownDimension()) {
            unknownShape.add(n.getName() + ":" + i);
          }
        }
        if (!OpTypes.SHAPE_ONLY.contains(n.getOp())
            || n.getOp().equals("BroadcastGradientArgs")) {
          continue;
        }
        for (int i = 0; i < op.numInputs(); i++) {
          org.tensorflow.ndarray.Shape s = op.input(i).shape();
          boolean known = n.getOp().equals("Rank") ? !s.isUnknown()
              : !s.isUnknown() && !s.hasUnknownDimension();
          if (!known) {
            dynamic.add(n.getName());
          }
        }
      }
    } catch (RuntimeException e) {
      LOG.debug("No shapes without the feeds' ({}): every shape a feed leads to counts as "
          + "unknown to grappler", e.getMessage());
      return null;
    }
    return new GrapplerShapes(dynamic, unknownShape);
  }

  /**
   * The model's dimensions of {@code out}: its static shape with the first unknown dimension the
   * batch size and later ones 1 (no dimensions where the rank is unknown).
   */
  private static long[] dims(Output<?> out, int batchSize) {
    long[] shape = out.shape().isUnknown() ? null : out.shape().asArray();
    long[] dims = shape == null ? new long[0] : shape.clone();
    for (int d = 0; d < dims.length; d++) {
      if (dims[d] < 0) {
        dims[d] = d == 0 || Arrays.stream(dims, 0, d).allMatch(x -> x >= 0) ? batchSize : 1;
      }
    }
    return dims;
  }

  /**
   * Sizes {@code BroadcastGradientArgs}' two outputs in {@code outs} ({@link BroadcastArgs}):
   * where both operands' shapes are read by {@code Shape} ops of tensors the model sizes, the
   * axes the kernel will give; otherwise at most the longer shape vector's length. TensorFlow
   * infers {@code [?]} for them, which the batch-size rule would size as a batch of elements.
   */
  private static void broadcastArgs(GraphOperation op, int batchSize, List<Tensor> outs) {
    long[][] shapes = new long[2][];
    long bound = 0;
    for (int k = 0; k < 2; k++) {
      Output<?> in = op.input(k);
      long[] vec = in.shape().isUnknown() ? null : in.shape().asArray();
      boolean known = vec != null && vec.length == 1 && vec[0] >= 0;
      bound = known && bound >= 0 ? Math.max(bound, vec[0]) : -1;
      GraphOperation from = (GraphOperation) in.op();
      if (from.type().equals("Shape") && from.numInputs() == 1
          && !from.input(0).shape().isUnknown()) {
        shapes[k] = dims(from.input(0), batchSize);
      }
    }
    long[] n = shapes[0] != null && shapes[1] != null
        ? BroadcastArgs.lengths(shapes[0], shapes[1]) : null;
    if (n == null && bound < 0) {
      return; // the rule for unknown dimensions stands
    }
    for (int k = 0; k < 2; k++) {
      Tensor t = outs.get(k);
      long len = n != null ? n[k] : bound;
      long size = t.shape().length == 1 && t.shape()[0] > 0 ? t.bytes() / t.shape()[0] : 4;
      outs.set(k, new Tensor(t.dtype(), new long[] {len}, len * size, false));
    }
  }

  /** A transient tensor of a fully known shape. */
  private static Tensor sized(TensorShapeProto shape, DataType dt) {
    long[] dims = new long[shape.getDimCount()];
    long elems = 1;
    for (int d = 0; d < dims.length; d++) {
      dims[d] = shape.getDim(d).getSize();
      elems *= dims[d];
    }
    return new Tensor(dtypeName(dt), dims, elems * dtypeSize(dt), false);
  }

  /** TensorFlow's short dtype name ({@code float32}, ...). */
  public static String dtypeName(DataType t) {
    return switch (t) {
      case DT_FLOAT -> "float32";
      case DT_DOUBLE -> "float64";
      case DT_HALF -> "float16";
      case DT_BFLOAT16 -> "bfloat16";
      case DT_INT32 -> "int32";
      case DT_INT64 -> "int64";
      case DT_INT16 -> "int16";
      case DT_INT8 -> "int8";
      case DT_UINT8 -> "uint8";
      case DT_UINT16 -> "uint16";
      case DT_UINT32 -> "uint32";
      case DT_UINT64 -> "uint64";
      case DT_BOOL -> "bool";
      case DT_STRING -> "string";
      case DT_COMPLEX64 -> "complex64";
      case DT_COMPLEX128 -> "complex128";
      case DT_RESOURCE -> "resource";
      case DT_VARIANT -> "variant";
      default -> t.name().toLowerCase(Locale.ROOT).replace("dt_", "");
    };
  }

  /** The DataType for a short dtype name. */
  public static DataType dataType(String name) {
    for (DataType t : DataType.values()) {
      if (t != DataType.UNRECOGNIZED && t.getNumber() < 100 && dtypeName(t).equals(name)) {
        return t;
      }
    }
    throw new IllegalArgumentException("unknown dtype " + name);
  }

  /** Bytes per element (0 for string, resource and variant). */
  static long dtypeSize(DataType t) {
    return switch (t) {
      case DT_DOUBLE, DT_INT64, DT_UINT64, DT_COMPLEX64 -> 8;
      case DT_COMPLEX128 -> 16;
      case DT_HALF, DT_BFLOAT16, DT_INT16, DT_UINT16 -> 2;
      case DT_INT8, DT_UINT8, DT_BOOL, DT_QINT8, DT_QUINT8 -> 1;
      case DT_STRING, DT_RESOURCE, DT_VARIANT -> 0;
      default -> 4;
    };
  }

  static GraphDef withFeedShapes(GraphDef gd, Map<String, long[]> feedShapes) {
    if (feedShapes.isEmpty()) {
      return gd;
    }
    GraphDef.Builder b = gd.toBuilder();
    for (int i = 0; i < b.getNodeCount(); i++) {
      NodeDef n = b.getNode(i);
      String key = feedShapes.containsKey(n.getName()) ? n.getName() : n.getName() + ":0";
      long[] shape = feedShapes.get(key);
      if (shape != null && n.getOp().startsWith("Placeholder")) {
        TensorShapeProto.Builder s = TensorShapeProto.newBuilder();
        for (long d : shape) {
          s.addDim(TensorShapeProto.Dim.newBuilder().setSize(d));
        }
        b.setNode(i, n.toBuilder().putAttr("shape", AttrValue.newBuilder().setShape(s).build()));
      }
    }
    return b.build();
  }
}
