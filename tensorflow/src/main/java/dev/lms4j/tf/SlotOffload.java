package dev.lms4j.tf;

import com.google.protobuf.ByteString;
import dev.lms4j.core.graph.OpTypes;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;

/**
 * Keeps an optimizer's slots (Adam's moments, momentum's accumulators, RMSProp's mean squares)
 * in host memory between their updates, outside the device budget: each slot comes in just
 * before its update and goes back out right after it, as ZeRO-Offload and DeepSpeed keep
 * optimizer state on the host. A model trained with Adam holds two slots per weight, twice its
 * weights' bytes, for the whole step though a slot is read only by its own update.
 *
 * <p>A slot qualifies when it is a ref variable ({@code VariableV2}) of a fully known floating
 * shape, of at least {@code minBytes}, read by exactly one update of the step ({@code Apply*}:
 * {@code ApplyAdam}, {@code ApplyMomentum}, {@code ApplyRMSProp}, ...) at an input other than the
 * weight's, and otherwise only assigned by initializers outside the step; an op of the step must
 * be ordered after its update by a control edge (the train op), so that the step runs the
 * swap-out. For slot {@code S} with update {@code U} (names under {@code lms4j/offload/S/}):
 *
 * <pre>
 *   host   = VariableV2(string, [])                     # the slot, serialized: outside the budget
 *   init:    S's initializers assign host = SerializeTensor(value) instead (names kept);
 *            a uniform value (a Fill of a scalar, ZerosLike, OnesLike) is a string Const of its
 *            few-byte serialized form, so init allocates nothing of S's size on the device
 *   parse  = ParseTensor(host)   ^ U's other inputs     # in: once U's gradient is there,
 *                                ^ the previous update's frees   # one update's slots at a time
 *   in     = Assign(S, parse, validate_shape=false)     # S takes parse's buffer (no copy)
 *   U      = Apply*(..., in, ...)                       # the update, unchanged
 *   save   = SerializeTensor(in) ^U ; out = Assign(host, save)
 *   free   = Assign(in, empty[0], validate_shape=false) ^out   # S lets its buffer go
 *   ops with a control edge from U get one from free (the train op waits for it)
 *   value  = ParseTensor(host)                          # outside the step: for checkpoints
 * </pre>
 *
 * <p>The update computes with the very values it would have read from the device: serialization
 * is exact, so the losses are bit-identical. {@code S} keeps its name with an unknown shape (it
 * holds an empty tensor between steps); {@link #VALUE} and {@link #HOST} name the nodes
 * checkpoints read and write instead. Costs two copies of the slot's bytes per step.
 *
 * <pre>{@code
 * SlotOffload.Result r = SlotOffload.rewrite(gd, Set.of("train_op"), 1 << 16);
 * log.info("{} slots ({} MiB) kept on the host between updates", r.slots().size(), r.bytes() >> 20);
 * }</pre>
 */
public final class SlotOffload {
  /** The name scope of the nodes the rewrite adds. */
  public static final String SCOPE = OpTypes.OFFLOAD_PREFIX;
  /** The host copy of slot {@code S}: {@code SCOPE + S + HOST}. */
  public static final String HOST = "/host";
  /** A parse of the host copy outside the step, for checkpoints: {@code SCOPE + S + VALUE}. */
  public static final String VALUE = "/value";
  /**
   * Attribute of an offload's ParseTensor: the slot's shape (TensorFlow infers none for a
   * parse), so the graph model sizes its output.
   */
  public static final String SHAPE_ATTR = "_lms4j_shape";
  /**
   * Attribute of an offload's {@code free}: the parse whose buffer the slot holds until then,
   * which the graph model keeps alive up to it (TensorFlow holds it through the variable).
   */
  public static final String HOLDS_ATTR = "_lms4j_holds";
  /** Default smallest slot offloaded: below it the four ops per step cost more than it frees. */
  public static final long DEFAULT_MIN_BYTES = 64 * 1024;

  private static final Set<String> VARIABLES = Set.of("VariableV2", "Variable");
  private static final Set<DataType> FLOATS = Set.of(DataType.DT_FLOAT, DataType.DT_HALF,
      DataType.DT_DOUBLE, DataType.DT_BFLOAT16);

  private SlotOffload() {}

  /**
   * The rewritten graph, the slots offloaded (names) with their bytes, and the weights offloaded
   * ({@link #rewrite(GraphDef, Set, long, boolean)} with weights) with theirs.
   */
  public record Result(GraphDef graphDef, List<String> slots, long bytes, List<String> weights,
      long weightBytes) {
    /** A result without weights. */
    public Result(GraphDef graphDef, List<String> slots, long bytes) {
      this(graphDef, slots, bytes, List.of(), 0);
    }

    public boolean changed() {
      return !slots.isEmpty() || !weights.isEmpty();
    }
  }

  /** The name of slot {@code s}'s offload node {@code suffix} ({@code /in}, {@code /free}). */
  private static String nameOf(Slot s, String suffix) {
    return SCOPE + s.var().getName() + suffix;
  }

  /** The node name of slot {@code slot}'s host copy, for checkpoints. */
  public static String hostOf(String slot) {
    return SCOPE + slot + HOST;
  }

  /** The node name of the parse of slot {@code slot}'s host copy, for checkpoints. */
  public static String valueOf(String slot) {
    return SCOPE + slot + VALUE;
  }

  /**
   * A slot and the update that reads it; for a weight ({@code input} 0), also the step's other
   * readers ({@code reads}: the node and the input index) and its shape readers ({@code Shape},
   * {@code Size}, {@code Rank}: made constants).
   */
  private record Slot(NodeDef var, NodeDef update, int input, long bytes, DataType dtype,
      List<Read> reads, List<NodeDef> shapeReads) {
    Slot(NodeDef var, NodeDef update, int input, long bytes, DataType dtype) {
      this(var, update, input, bytes, dtype, List.of(), List.of());
    }

    boolean weight() {
      return input == 0;
    }
  }

  /**
   * A reader of a weight: {@code node}'s input {@code input}; {@code inStep} false for an op the
   * step does not run (an unused gradient, an evaluation), which parses the host copy as it is.
   */
  private record Read(NodeDef node, int input, boolean inStep) {}

  /** Ops whose output is only their input's shape: a weight's are made constants. */
  private static final Set<String> SHAPE_READERS = Set.of("Shape", "Size", "Rank");

  /**
   * Offloads every qualifying slot of the step that runs {@code targets} (op or tensor names).
   * A graph whose slots are offloaded already is returned as it is.
   */
  public static Result rewrite(GraphDef gd, Set<String> targets, long minBytes) {
    return rewrite(gd, targets, minBytes, false);
  }

  /**
   * As {@link #rewrite(GraphDef, Set, long)}; with {@code weights}, the weights too: a weight
   * ({@code VariableV2} of at least {@code minBytes}, updated in place by one {@code Apply*}
   * update of the step, read by other ops of the step only before that update can run, and
   * otherwise by initializers, shape ops and ops outside the step that only read it, which
   * parse the host copy as it is when they run) is kept on the host as a slot is around its
   * update, and every other reader reads a parse of the host copy made just before it
   * ({@code read_k = Reshape(ParseTensor(host), shape)}, control inputs: the reader's other
   * inputs), which the host copy's {@code out} waits for; its shape readers become constants.
   * The weights go as ZeRO-Offload's parameters go: only where nothing else fits.
   */
  public static Result rewrite(GraphDef gd, Set<String> targets, long minBytes,
      boolean weights) {
    Result chained = rewrite(gd, targets, minBytes, weights, true);
    if (!chained.changed() || ScheduleRewriter.cycle(chained.graphDef()).isEmpty()) {
      return chained;
    }
    // the chain follows the graph's depth, which a graph that orders an update before another
    // one's gradient could contradict: then each slot waits for its own update's inputs only
    Result unchained = rewrite(gd, targets, minBytes, weights, false);
    return !weights || ScheduleRewriter.cycle(unchained.graphDef()).isEmpty() ? unchained
        : rewrite(gd, targets, minBytes, false);
  }

  /**
   * True when {@link #rewrite} would offload a slot of the step that runs {@code targets}
   * (without building the rewritten graph).
   */
  public static boolean qualifies(GraphDef gd, Set<String> targets, long minBytes) {
    return !slots(gd, targets, minBytes, false).isEmpty();
  }

  /**
   * True when {@link #rewrite(GraphDef, Set, long, boolean)} with weights would offload a weight
   * of the step that runs {@code targets}.
   */
  public static boolean weightsQualify(GraphDef gd, Set<String> targets, long minBytes) {
    return slots(gd, targets, minBytes, true).stream().anyMatch(Slot::weight);
  }

  /** The qualifying slots of the step that runs {@code targets}; none where offloaded already. */
  private static List<Slot> slots(GraphDef gd, Set<String> targets, long minBytes,
      boolean weights) {
    if (targets.isEmpty() || gd.getNodeList().stream().anyMatch(n -> n.getName()
        .startsWith(SCOPE))) {
      return List.of();
    }
    return qualifying(gd, GraphImporter.ancestors(gd, targets), minBytes, weights);
  }

  private static Result rewrite(GraphDef gd, Set<String> targets, long minBytes,
      boolean weights, boolean chain) {
    List<Slot> slots = slots(gd, targets, minBytes, weights);
    if (slots.isEmpty()) {
      return new Result(gd, List.of(), 0);
    }
    Map<String, List<String[]>> readsOf = new HashMap<>(); // reader -> {input index, read node}
    Map<String, NodeDef> shapeConsts = new HashMap<>();
    for (Slot s : slots) {
      for (int k = 0; k < s.reads().size(); k++) {
        Read r = s.reads().get(k);
        readsOf.computeIfAbsent(r.node().getName(), x -> new ArrayList<>())
            .add(new String[] {Integer.toString(r.input()), nameOf(s, "/read_" + k)});
      }
      for (NodeDef sh : s.shapeReads()) {
        shapeConsts.put(sh.getName(), shapeConst(sh, s));
      }
    }
    Map<String, Slot> byVar = new LinkedHashMap<>();
    Map<String, List<Slot>> byUpdate = new HashMap<>();
    for (Slot s : slots) {
      byVar.put(s.var().getName(), s);
      byUpdate.computeIfAbsent(s.update().getName(), k -> new ArrayList<>()).add(s);
    }
    GraphDef.Builder b = GraphDef.newBuilder(gd).clearNode();
    List<NodeDef> added = new ArrayList<>();
    Map<String, NodeDef> byName = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      byName.put(n.getName(), n);
    }
    for (NodeDef n : gd.getNodeList()) {
      String name = n.getName();
      Slot own = byVar.get(name);
      if (own != null) {
        // between steps the slot holds an empty tensor: its shape is the parse's
        b.addNode(n.toBuilder().putAttr("shape", AttrValue.newBuilder().setShape(
            TensorShapeProto.newBuilder().setUnknownRank(true)).build()));
        continue;
      }
      if (n.getOp().equals("Assign") && n.getInputCount() >= 2
          && byVar.containsKey(GraphImporter.opName(n.getInput(0)))) {
        // an initializer: the value goes to the host copy, serialized, under the same name
        Slot s = byVar.get(GraphImporter.opName(n.getInput(0)));
        TensorProto uniform = uniformValue(s, n, byName);
        String ser;
        if (uniform != null) {
          // a uniform value (zeros, ones) serialized here, a few bytes: init computes nothing
          // on the device for it (no temporary of the slot's size before the step's buffers)
          ser = nameOf(s, "/init_value_" + name.replace('/', '_'));
          added.add(node(ser, "Const", hostDevice(n.getDevice()))
              .putAttr("dtype", type(DataType.DT_STRING))
              .putAttr("value", AttrValue.newBuilder().setTensor(TensorProto.newBuilder()
                  .setDtype(DataType.DT_STRING)
                  .setTensorShape(TensorShapeProto.getDefaultInstance())
                  .addStringVal(uniform.toByteString())).build()).build());
        } else {
          ser = nameOf(s, "/init_serialize_" + name.replace('/', '_'));
          added.add(node(ser, "SerializeTensor", hostDevice(n.getDevice()), n.getInput(1))
              .putAttr("T", type(s.dtype())).build());
        }
        NodeDef.Builder a = n.toBuilder().setDevice(hostDevice(n.getDevice()))
            .setInput(0, hostOf(s.var().getName())).setInput(1, ser)
            .putAttr("T", type(DataType.DT_STRING))
            .putAttr("validate_shape", AttrValue.newBuilder().setB(true).build());
        b.addNode(a);
        continue;
      }
      if (shapeConsts.containsKey(name)) {
        b.addNode(shapeConsts.get(name));
        continue;
      }
      List<Slot> mine = byUpdate.get(name);
      NodeDef.Builder nb = n.toBuilder();
      for (String[] r : readsOf.getOrDefault(name, List.of())) {
        nb.setInput(Integer.parseInt(r[0]), r[1]);
      }
      if (mine != null) {
        for (Slot s : mine) {
          nb.setInput(s.input(), nameOf(s, "/in"));
        }
      }
      // ops ordered after an update wait for its slots to go back out
      for (String in : n.getInputList()) {
        if (in.startsWith("^") && byUpdate.containsKey(in.substring(1))) {
          for (Slot s : byUpdate.get(in.substring(1))) {
            nb.addInput("^" + nameOf(s, "/free"));
          }
        }
      }
      b.addNode(nb);
    }
    // one update's slots in at a time, in the order their updates can run: the updates'
    // depth in the graph (longest path from its sources), so that gradients are not held
    List<String> updates = new ArrayList<>(byUpdate.keySet());
    Map<String, Integer> depth = depths(gd);
    updates.sort(java.util.Comparator.comparing((String u) -> depth.getOrDefault(u, 0))
        .thenComparing(u -> u));
    Map<String, List<String>> waits = new HashMap<>();
    for (int i = 1; chain && i < updates.size(); i++) {
      List<String> prev = new ArrayList<>();
      for (Slot s : byUpdate.get(updates.get(i - 1))) {
        prev.add("^" + nameOf(s, "/free"));
      }
      waits.put(updates.get(i), prev);
    }
    long bytes = 0;
    long weightBytes = 0;
    List<String> names = new ArrayList<>();
    List<String> weightNames = new ArrayList<>();
    for (Slot s : slots) {
      if (s.weight()) {
        weightBytes += s.bytes();
        weightNames.add(s.var().getName());
      } else {
        bytes += s.bytes();
        names.add(s.var().getName());
      }
      added.addAll(offload(s, waits.getOrDefault(s.update().getName(), List.of())));
      added.addAll(reads(s));
    }
    added.forEach(b::addNode);
    return new Result(b.build(), names, bytes, weightNames, weightBytes);
  }

  /**
   * A weight's reads: per reader, a parse of the host copy once the reader's other inputs are
   * there, given the weight's static shape ({@code Reshape}, no copy) so that grappler sees the
   * shapes it saw; the host copy is written back only after every read ({@code out} waits).
   */
  private static List<NodeDef> reads(Slot s) {
    List<NodeDef> out = new ArrayList<>();
    if (s.reads().isEmpty()) {
      return out;
    }
    String var = s.var().getName();
    String host = hostDevice(s.var().getDevice());
    TensorShapeProto shape = shapeOf(s);
    TensorProto.Builder dims = TensorProto.newBuilder().setDtype(DataType.DT_INT64)
        .setTensorShape(TensorShapeProto.newBuilder().addDim(TensorShapeProto.Dim.newBuilder()
            .setSize(shape.getDimCount())));
    shape.getDimList().forEach(d -> dims.addInt64Val(d.getSize()));
    out.add(node(nameOf(s, "/read_shape"), "Const", host)
        .putAttr("dtype", type(DataType.DT_INT64))
        .putAttr("value", AttrValue.newBuilder().setTensor(dims).build()).build());
    for (int k = 0; k < s.reads().size(); k++) {
      Read r = s.reads().get(k);
      Set<String> after = otherInputs(r.node(), r.input(), Set.of(var));
      NodeDef.Builder parse = node(nameOf(s, "/read_" + k + "/parse"), "ParseTensor", host,
          hostOf(var)).putAttr("out_type", type(s.dtype()))
          .putAttr(SHAPE_ATTR, AttrValue.newBuilder().setShape(shape).build());
      after.forEach(parse::addInput);
      out.add(parse.build());
      out.add(node(nameOf(s, "/read_" + k), "Reshape", s.var().getDevice(),
          nameOf(s, "/read_" + k + "/parse"), nameOf(s, "/read_shape"))
          .putAttr("T", type(s.dtype())).putAttr("Tshape", type(DataType.DT_INT64)).build());
    }
    return out;
  }

  /** A weight's shape reader as a constant of the same name (its control inputs kept). */
  private static NodeDef shapeConst(NodeDef sh, Slot s) {
    DataType t = sh.containsAttr("out_type") ? sh.getAttrOrThrow("out_type").getType()
        : DataType.DT_INT32;
    TensorShapeProto shape = shapeOf(s);
    TensorProto.Builder v = TensorProto.newBuilder().setDtype(t);
    long size = 1;
    for (TensorShapeProto.Dim d : shape.getDimList()) {
      size *= d.getSize();
    }
    switch (sh.getOp()) {
      case "Shape" -> {
        v.setTensorShape(TensorShapeProto.newBuilder().addDim(TensorShapeProto.Dim.newBuilder()
            .setSize(shape.getDimCount())));
        for (TensorShapeProto.Dim d : shape.getDimList()) {
          if (t == DataType.DT_INT64) {
            v.addInt64Val(d.getSize());
          } else {
            v.addIntVal((int) d.getSize());
          }
        }
      }
      case "Size" -> {
        v.setTensorShape(TensorShapeProto.newBuilder());
        if (t == DataType.DT_INT64) {
          v.addInt64Val(size);
        } else {
          v.addIntVal((int) size);
        }
      }
      default -> v.setTensorShape(TensorShapeProto.newBuilder()).addIntVal(shape.getDimCount());
    }
    NodeDef.Builder c = node(sh.getName(), "Const", sh.getDevice())
        .putAttr("dtype", type(t)).putAttr("value", AttrValue.newBuilder().setTensor(v).build());
    for (String in : sh.getInputList()) {
      if (in.startsWith("^")) {
        c.addInput(in);
      }
    }
    return c.build();
  }

  /** The variable's static shape. */
  private static TensorShapeProto shapeOf(Slot s) {
    TensorShapeProto.Builder shape = TensorShapeProto.newBuilder();
    for (TensorShapeProto.Dim d : s.var().getAttrOrThrow("shape").getShape().getDimList()) {
      shape.addDim(TensorShapeProto.Dim.newBuilder().setSize(d.getSize()));
    }
    return shape.build();
  }

  /**
   * The nodes that move slot {@code s} in and out around its update; its parse also waits for
   * {@code waits} (control inputs: the previous update's slots gone back out).
   */
  private static List<NodeDef> offload(Slot s, List<String> waits) {
    String var = s.var().getName();
    String p = SCOPE + var;
    String dev = s.var().getDevice();
    String host = hostDevice(dev);
    NodeDef u = s.update();
    List<NodeDef> out = new ArrayList<>();
    out.add(node(hostOf(var), "VariableV2", host)
        .putAttr("dtype", type(DataType.DT_STRING))
        .putAttr("shape", AttrValue.newBuilder().setShape(TensorShapeProto.newBuilder()).build())
        .putAttr("container", AttrValue.newBuilder().setS(ByteString.EMPTY).build())
        .putAttr("shared_name", AttrValue.newBuilder().setS(ByteString.EMPTY).build()).build());
    // in once the update's other inputs are there (its gradient last): not at the step's start
    // (not on the variables it brings in: the slot, and the weight, which may be the slot)
    Set<String> after = otherInputs(u, s.input(), new java.util.HashSet<>(List.of(var,
        GraphImporter.opName(u.getInput(0)))));
    after.addAll(waits);
    TensorShapeProto shape = shapeOf(s);
    NodeDef.Builder parse = node(p + "/parse", "ParseTensor", host, hostOf(var))
        .putAttr("out_type", type(s.dtype()))
        .putAttr(SHAPE_ATTR, AttrValue.newBuilder().setShape(shape).build());
    after.forEach(parse::addInput);
    out.add(parse.build());
    out.add(node(p + "/in", "Assign", dev, var, p + "/parse")
        .putAttr("T", type(s.dtype()))
        .putAttr("validate_shape", AttrValue.newBuilder().setB(false).build())
        .putAttr("use_locking", AttrValue.newBuilder().setB(true).build())
        // the slot takes the parse's buffer over instead of copying it (AssignOp forwards its
        // value only when its allocator constraints are relaxed, as grappler relaxes them)
        .putAttr("_grappler_relax_allocator_constraints",
            AttrValue.newBuilder().setB(true).build()).build());
    out.add(node(p + "/save", "SerializeTensor", host, p + "/in", "^" + u.getName())
        .putAttr("T", type(s.dtype())).build());
    NodeDef.Builder write = node(p + "/out", "Assign", host, hostOf(var), p + "/save");
    for (int k = 0; k < s.reads().size(); k++) {
      // a weight's host copy changes only once every read of the step has parsed it (a read
      // outside the step parses it as it is whenever it runs)
      if (s.reads().get(k).inStep()) {
        write.addInput("^" + nameOf(s, "/read_" + k + "/parse"));
      }
    }
    out.add(write
        .putAttr("T", type(DataType.DT_STRING))
        .putAttr("validate_shape", AttrValue.newBuilder().setB(true).build())
        .putAttr("use_locking", AttrValue.newBuilder().setB(true).build()).build());
    out.add(node(p + "/empty", "Const", dev)
        .putAttr("dtype", type(s.dtype()))
        .putAttr("value", AttrValue.newBuilder().setTensor(TensorProto.newBuilder()
            .setDtype(s.dtype()).setTensorShape(TensorShapeProto.newBuilder()
                .addDim(TensorShapeProto.Dim.newBuilder().setSize(0)))).build()).build());
    out.add(node(p + "/free", "Assign", dev, p + "/in", p + "/empty", "^" + p + "/out")
        .putAttr("T", type(s.dtype()))
        .putAttr("validate_shape", AttrValue.newBuilder().setB(false).build())
        .putAttr("use_locking", AttrValue.newBuilder().setB(true).build())
        .putAttr(HOLDS_ATTR, AttrValue.newBuilder().setS(ByteString.copyFromUtf8(p + "/parse"))
            .build()).build());
    out.add(node(valueOf(var), "ParseTensor", host, hostOf(var))
        .putAttr("out_type", type(s.dtype()))
        .putAttr(SHAPE_ATTR, AttrValue.newBuilder().setShape(shape).build()).build());
    return out;
  }

  /**
   * Each node's longest path from a node without inputs (data and control edges; nodes on a
   * cycle, which TensorFlow never runs, are left out).
   */
  private static Map<String, Integer> depths(GraphDef gd) {
    Map<String, List<String>> consumers = new HashMap<>();
    Map<String, Integer> pending = new HashMap<>();
    java.util.ArrayDeque<String> ready = new java.util.ArrayDeque<>();
    for (NodeDef n : gd.getNodeList()) {
      pending.put(n.getName(), n.getInputCount());
      for (String in : n.getInputList()) {
        consumers.computeIfAbsent(GraphImporter.opName(in), k -> new ArrayList<>())
            .add(n.getName());
      }
      if (n.getInputCount() == 0) {
        ready.add(n.getName());
      }
    }
    Map<String, Integer> depth = new HashMap<>();
    ready.forEach(v -> depth.put(v, 0));
    while (!ready.isEmpty()) {
      String v = ready.poll();
      for (String c : consumers.getOrDefault(v, List.of())) {
        depth.merge(c, depth.get(v) + 1, Math::max);
        if (pending.merge(c, -1, Integer::sum) == 0) {
          ready.add(c);
        }
      }
    }
    return depth;
  }

  /**
   * Where the host copy and its (de)serialization run for a slot on {@code device}: the CPU
   * where the slot is on a GPU (TensorFlow has no GPU kernels for strings; the parse's output
   * then reaches the slot's device through the assign that brings it in, the host-to-device
   * copy), else the slot's own device.
   */
  static String hostDevice(String device) {
    return device.toUpperCase(java.util.Locale.ROOT).contains("GPU") ? "/device:CPU:0" : device;
  }

  /**
   * What a parse made for {@code n}'s input {@code input} waits for: {@code n}'s other inputs
   * as control inputs (its control inputs kept), but none on an op in {@code skip} (the
   * variables it brings in).
   */
  private static Set<String> otherInputs(NodeDef n, int input, Set<String> skip) {
    Set<String> after = new LinkedHashSet<>();
    for (int i = 0; i < n.getInputCount(); i++) {
      String in = n.getInput(i);
      String op = GraphImporter.opName(in);
      if (skip.contains(op) || i == input && !in.startsWith("^")) {
        continue;
      }
      after.add("^" + op);
    }
    return after;
  }

  /** The slots of the step's updates that qualify (see the class comment). */
  private static List<Slot> qualifying(GraphDef gd, Set<String> step, long minBytes,
      boolean weights) {
    Map<String, NodeDef> byName = new HashMap<>();
    Map<String, List<NodeDef>> consumers = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      byName.put(n.getName(), n);
      for (String in : n.getInputList()) {
        consumers.computeIfAbsent(GraphImporter.opName(in), k -> new ArrayList<>()).add(n);
      }
    }
    List<Slot> out = new ArrayList<>();
    for (NodeDef u : gd.getNodeList()) {
      if (!u.getOp().startsWith("Apply") || !step.contains(u.getName())
          || !orderedAfter(u, consumers, step)) {
        continue;
      }
      if (weights && u.getInputCount() > 0 && !u.getInput(0).startsWith("^")) {
        NodeDef v = byName.get(GraphImporter.opName(u.getInput(0)));
        Slot w = v == null ? null : weight(v, u, consumers, step, minBytes);
        if (w != null) {
          out.add(w);
        }
      }
      if (u.getOp().equals("ApplyGradientDescent")) {
        continue;
      }
      for (int i = 1; i < u.getInputCount(); i++) {
        String in = u.getInput(i);
        if (in.startsWith("^") || !(in.equals(GraphImporter.opName(in))
            || in.endsWith(":0"))) {
          continue;
        }
        NodeDef v = byName.get(GraphImporter.opName(in));
        Slot s = v == null ? null : slot(v, u, i, consumers, step, minBytes);
        if (s != null) {
          out.add(s);
        }
      }
    }
    return out;
  }

  /** True when an op of the step waits for {@code u} through a control edge. */
  private static boolean orderedAfter(NodeDef u, Map<String, List<NodeDef>> consumers,
      Set<String> step) {
    for (NodeDef c : consumers.getOrDefault(u.getName(), List.of())) {
      if (step.contains(c.getName()) && c.getInputList().contains("^" + u.getName())) {
        return true;
      }
    }
    return false;
  }

  private static Slot slot(NodeDef v, NodeDef u, int input,
      Map<String, List<NodeDef>> consumers, Set<String> step, long minBytes) {
    long bytes = bytesOf(v);
    if (bytes < minBytes || bytes < 0
        || GraphImporter.opName(u.getInput(0)).equals(v.getName())) {
      return null;
    }
    DataType dt = v.getAttrOrThrow("dtype").getType();
    for (NodeDef c : consumers.getOrDefault(v.getName(), List.of())) {
      if (!(c == u ? readsOnlyAt(c, v, input) : initializer(c, v, consumers, step)
          || !step.contains(c.getName()) && onlyControl(c, v.getName()))) {
        return null;
      }
    }
    return new Slot(v, u, input, bytes, dt);
  }

  /**
   * {@code v} as a weight updated in place by {@code u} (at its input 0), or null where it does
   * not qualify: a floating {@code VariableV2} of a known shape and at least {@code minBytes},
   * read in the step by {@code u} once, by shape ops, and by ops that only read it and cannot
   * run after {@code u} (no path from {@code u} to them), otherwise by initializers, through
   * control edges, and by ops outside the step that only read it and feed no write of a
   * variable (they parse the host copy; an initializer's input would run before it is filled).
   */
  private static Slot weight(NodeDef v, NodeDef u, Map<String, List<NodeDef>> consumers,
      Set<String> step, long minBytes) {
    long bytes = bytesOf(v);
    if (bytes < minBytes || bytes < 0 || !readsOnlyAt(u, v, 0)) {
      return null;
    }
    DataType dt = v.getAttrOrThrow("dtype").getType();
    List<Read> reads = new ArrayList<>();
    List<NodeDef> shapes = new ArrayList<>();
    Set<String> seen = new java.util.HashSet<>();
    for (NodeDef c : consumers.getOrDefault(v.getName(), List.of())) {
      if (c == u || !seen.add(c.getName())) {
        continue;
      }
      boolean inStep = step.contains(c.getName());
      if (!inStep && (initializer(c, v, consumers, step) || onlyControl(c, v.getName()))) {
        continue;
      }
      if (onlyControl(c, v.getName())) {
        return null; // a step op ordered on the variable itself: not a read lms4j can place
      }
      if (SHAPE_READERS.contains(c.getOp()) && c.getInputCount() >= 1
          && GraphImporter.opName(c.getInput(0)).equals(v.getName())) {
        shapes.add(c);
        continue;
      }
      if (WRITERS.stream().anyMatch(c.getOp()::startsWith)) {
        return null;
      }
      if (!inStep && feedsAWrite(c, consumers)) {
        // an initializer's input (a moving average starting at the weight's value): init
        // would parse the host copy before it is filled
        return null;
      }
      for (int i = 0; i < c.getInputCount(); i++) {
        String in = c.getInput(i);
        if (!in.startsWith("^") && GraphImporter.opName(in).equals(v.getName())) {
          if (!(in.equals(v.getName()) || in.endsWith(":0"))) {
            return null;
          }
          reads.add(new Read(c, i, inStep));
        }
      }
    }
    // a read the graph orders after the update sees the updated value: not kept on the host
    Set<String> after = new java.util.HashSet<>();
    java.util.ArrayDeque<String> todo = new java.util.ArrayDeque<>(List.of(u.getName()));
    while (!todo.isEmpty()) {
      for (NodeDef c : consumers.getOrDefault(todo.poll(), List.of())) {
        if (step.contains(c.getName()) && after.add(c.getName())) {
          todo.add(c.getName());
        }
      }
    }
    for (Read r : reads) {
      if (after.contains(r.node().getName())) {
        return null;
      }
    }
    return new Slot(v, u, 0, bytes, dt, reads, shapes);
  }

  /** True when an op that writes a variable is {@code op} or downstream of it. */
  private static boolean feedsAWrite(NodeDef op, Map<String, List<NodeDef>> consumers) {
    Set<String> seen = new java.util.HashSet<>(List.of(op.getName()));
    java.util.ArrayDeque<NodeDef> todo = new java.util.ArrayDeque<>(List.of(op));
    while (!todo.isEmpty()) {
      NodeDef n = todo.poll();
      if (WRITERS.stream().anyMatch(n.getOp()::startsWith)) {
        return true;
      }
      for (NodeDef c : consumers.getOrDefault(n.getName(), List.of())) {
        if (seen.add(c.getName())) {
          todo.add(c);
        }
      }
    }
    return false;
  }

  /**
   * The bytes of {@code v} where it is a ref variable of a floating type and a fully known
   * shape, else -1.
   */
  private static long bytesOf(NodeDef v) {
    if (!VARIABLES.contains(v.getOp()) || !v.containsAttr("dtype") || !v.containsAttr("shape")
        || !FLOATS.contains(v.getAttrOrThrow("dtype").getType())
        || v.getAttrOrThrow("shape").getShape().getUnknownRank()) {
      return -1;
    }
    long elems = 1;
    for (TensorShapeProto.Dim d : v.getAttrOrThrow("shape").getShape().getDimList()) {
      if (d.getSize() < 0) {
        return -1;
      }
      elems *= d.getSize();
    }
    return elems * GraphImporter.dtypeSize(v.getAttrOrThrow("dtype").getType());
  }

  /** Ops that may write a variable they take: a weight they take is not offloaded. */
  private static final List<String> WRITERS = List.of("Assign", "Scatter", "Apply",
      "SparseApply", "ResourceApply", "ResourceSparseApply", "CountUpTo", "TemporaryVariable",
      "DestroyTemporaryVariable");

  /** True when {@code u} reads {@code v} at {@code input} and nowhere else. */
  private static boolean readsOnlyAt(NodeDef u, NodeDef v, int input) {
    for (int k = 0; k < u.getInputCount(); k++) {
      String in = u.getInput(k);
      if (k != input && GraphImporter.opName(in).equals(v.getName())) {
        return false;
      }
    }
    return true;
  }

  /**
   * True for an initializer of {@code v} outside the step: an {@code Assign} to it whose output
   * only orders ops outside the step.
   */
  private static boolean initializer(NodeDef a, NodeDef v, Map<String, List<NodeDef>> consumers,
      Set<String> step) {
    if (!a.getOp().equals("Assign") || step.contains(a.getName()) || a.getInputCount() < 2
        || !a.getInput(0).equals(v.getName()) && !a.getInput(0).equals(v.getName() + ":0")
        || GraphImporter.opName(a.getInput(1)).equals(v.getName())) {
      return false;
    }
    for (NodeDef c : consumers.getOrDefault(a.getName(), List.of())) {
      if (step.contains(c.getName()) || !onlyControl(c, a.getName())) {
        return false;
      }
    }
    return true;
  }

  /** True when every edge from {@code op} into {@code c} is a control edge. */
  private static boolean onlyControl(NodeDef c, String op) {
    for (String in : c.getInputList()) {
      if (!in.startsWith("^") && GraphImporter.opName(in).equals(op)) {
        return false;
      }
    }
    return true;
  }

  /**
   * The serialized form of the initial value that {@code assign} gives slot {@code s}, when it is
   * uniform: a {@code Fill} of a scalar {@code Const} (through {@link InitConstants}'
   * no-fold wrapper; through a {@code Cast} to the slot's dtype for a zero, as the framework's
   * optimizers build their slots: {@code Fill(Shape(weight), Cast(0))}), or a
   * {@code ZerosLike}/{@code OnesLike}. The assignment validates the shape, so the value has the
   * slot's. The proto holds the slot's dtype and shape and one value at most (none for zeros):
   * TensorFlow's {@code ParseTensor} fills every element from it, the same bits the op computed.
   * Null when the value is anything else, when the assignment does not validate the shape, or
   * for a non-zero of a dtype other than float and double.
   */
  private static TensorProto uniformValue(Slot s, NodeDef assign, Map<String, NodeDef> byName) {
    if (!assign.getAttrOrDefault("validate_shape", AttrValue.newBuilder().setB(true).build())
        .getB()) {
      return null;
    }
    NodeDef v = through(assign.getInput(1), byName);
    if (v == null) {
      return null;
    }
    TensorProto.Builder out = TensorProto.newBuilder().setDtype(s.dtype())
        .setTensorShape(shapeOf(s));
    switch (v.getOp()) {
      case "ZerosLike":
        return out.build();
      case "OnesLike":
        return withValue(out, s.dtype(), 1.0);
      case "Fill": {
        NodeDef dims = v.getInputCount() == 2 ? through(v.getInput(0), byName) : null;
        NodeDef value = v.getInputCount() == 2 ? through(v.getInput(1), byName) : null;
        if (dims == null || value == null || (dims.getOp().equals("Const")
            && InitConstants.elements(dims) != s.bytes() / GraphImporter.dtypeSize(s.dtype()))) {
          return null;
        }
        if (value.getOp().equals("Cast") && value.getInputCount() == 1
            && value.getAttrOrDefault("DstT", AttrValue.getDefaultInstance()).getType()
                == s.dtype()) {
          NodeDef c = through(value.getInput(0), byName);
          return c != null && c.getOp().equals("Const")
              && zero(c.getAttrOrThrow("value").getTensor()) ? out.build() : null;
        }
        if (!value.getOp().equals("Const")) {
          return null;
        }
        TensorProto t = value.getAttrOrThrow("value").getTensor();
        if (t.getDtype() != s.dtype() || t.getTensorShape().getDimCount() != 0) {
          return null;
        }
        Double d = scalarOf(t);
        return d == null || d.isNaN() ? null : withValue(out, s.dtype(), d);
      }
      default:
        return null;
    }
  }

  /** True when every bit of {@code t}'s values is zero (a numeric zero of any dtype but -0). */
  private static boolean zero(TensorProto t) {
    for (byte x : t.getTensorContent().toByteArray()) {
      if (x != 0) {
        return false;
      }
    }
    return t.getFloatValList().stream().allMatch(f -> Float.floatToRawIntBits(f) == 0)
        && t.getDoubleValList().stream().allMatch(d -> Double.doubleToRawLongBits(d) == 0)
        && t.getIntValList().stream().allMatch(i -> i == 0)
        && t.getInt64ValList().stream().allMatch(i -> i == 0)
        && t.getHalfValList().stream().allMatch(i -> i == 0)
        && t.getBoolValList().stream().noneMatch(b -> b);
  }

  /**
   * The node behind data input {@code in} (output 0), through {@code Identity} ops and
   * {@link InitConstants}' no-fold wrappers (an unfed {@code PlaceholderWithDefault}); or null.
   */
  private static NodeDef through(String in, Map<String, NodeDef> byName) {
    for (int hops = 0; hops < 8; hops++) {
      if (in.startsWith("^") || (in.contains(":") && !in.endsWith(":0"))) {
        return null;
      }
      NodeDef n = byName.get(GraphImporter.opName(in));
      boolean pass = n != null && (n.getOp().equals("Identity")
          || (n.getOp().equals("PlaceholderWithDefault")
              && n.getName().endsWith(InitConstants.SUFFIX)));
      if (!pass) {
        return n;
      }
      if (n.getInputCount() == 0) {
        return null;
      }
      in = n.getInput(0);
    }
    return null;
  }

  /** A float or double scalar's value, or null (another dtype, unreadable). */
  private static Double scalarOf(TensorProto t) {
    if (!t.getTensorContent().isEmpty()) {
      java.nio.ByteBuffer b = t.getTensorContent().asReadOnlyByteBuffer()
          .order(java.nio.ByteOrder.LITTLE_ENDIAN);
      return switch (t.getDtype()) {
        case DT_FLOAT -> b.remaining() == 4 ? (double) b.getFloat() : null;
        case DT_DOUBLE -> b.remaining() == 8 ? b.getDouble() : null;
        default -> null;
      };
    }
    return switch (t.getDtype()) {
      case DT_FLOAT -> t.getFloatValCount() == 1 ? (double) t.getFloatVal(0) : null;
      case DT_DOUBLE -> t.getDoubleValCount() == 1 ? t.getDoubleVal(0) : null;
      default -> null;
    };
  }

  /**
   * {@code out} with every element {@code value}: no values for a zero (TensorFlow fills the
   * default), else one, which it repeats; null for a non-zero of a dtype other than float and
   * double.
   */
  private static TensorProto withValue(TensorProto.Builder out, DataType t, double value) {
    if (value == 0 && Double.doubleToRawLongBits(value) == 0) {
      return out.build();
    }
    return switch (t) {
      case DT_FLOAT -> out.addFloatVal((float) value).build();
      case DT_DOUBLE -> out.addDoubleVal(value).build();
      default -> null;
    };
  }

  private static NodeDef.Builder node(String name, String op, String device, String... inputs) {
    NodeDef.Builder b = NodeDef.newBuilder().setName(name).setOp(op).setDevice(device);
    for (String in : inputs) {
      b.addInput(in);
    }
    return b;
  }

  private static AttrValue type(DataType t) {
    return AttrValue.newBuilder().setType(t).build();
  }
}
