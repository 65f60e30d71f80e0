package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.BufferAliases;
import dev.lms4j.core.memory.Liveness;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import dev.lms4j.tf.run.SyntheticFeeds;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.buffer.FloatDataBuffer;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;

/**
 * {@link SlotOffload}: which slots go to the host, the nodes that move them, the graph model of
 * them, and the bits a step computes with them there.
 */
class SlotOffloadTest {
  private static final long MIB = 1 << 20;

  /**
   * The framework's Adam MLP (4 layers of 256 units, then 10 classes): every weight has an
   * {@code -m} and a {@code -v} slot read only by its {@code ApplyAdam}; the 256 KiB ones go,
   * the logits' 10 KiB ones (below the 64 KiB default) stay.
   */
  @Test
  void everyLargeAdamSlotOfTheStepGoesToTheHost() {
    TrainingGraph tg = AdamNet.mlp(64, 256, 4);
    SlotOffload.Result r = SlotOffload.rewrite(tg.graphDef(), tg.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES);
    assertThat(r.slots()).containsExactlyInAnyOrder("dense0_kernel-m", "dense0_kernel-v",
        "dense1_kernel-m", "dense1_kernel-v", "dense2_kernel-m", "dense2_kernel-v",
        "dense3_kernel-m", "dense3_kernel-v");
    assertThat(r.bytes()).isEqualTo(8 * 256 * 256 * 4L);
    Map<String, NodeDef> n = TfTests.nodes(r.graphDef());
    String p = SlotOffload.SCOPE + "dense0_kernel-m";
    assertThat(n.get(SlotOffload.hostOf("dense0_kernel-m")).getOp()).isEqualTo("VariableV2");
    assertThat(n.get(p + "/parse").getOp()).isEqualTo("ParseTensor");
    assertThat(n.get(p + "/in").getInputList()).containsExactly("dense0_kernel-m", p + "/parse");
    // the update reads the slot through the assign that brings it in
    NodeDef update = r.graphDef().getNodeList().stream()
        .filter(x -> x.getOp().equals("ApplyAdam") && x.getInput(0).equals("dense0_kernel"))
        .findFirst().orElseThrow();
    assertThat(update.getInput(1)).isEqualTo(p + "/in");
    assertThat(update.getInput(2)).isEqualTo(SlotOffload.SCOPE + "dense0_kernel-v/in");
    assertThat(n.get(p + "/save").getInputList()).containsExactly(p + "/in",
        "^" + update.getName());
    // the parse waits for the update's gradient, not for the step's start
    String grad = GraphImporter.opName(update.getInput(9));
    assertThat(n.get(p + "/parse").getInputList()).contains("^" + grad);
    // the train op waits for every slot to go back out
    assertThat(n.get("train_op").getInputList()).contains("^" + p + "/free");
    // the slot keeps its name, with no shape: between steps it holds an empty tensor
    assertThat(n.get("dense0_kernel-m").getAttrOrThrow("shape").getShape().getUnknownRank())
        .isTrue();
    // an initializer now fills the host copy, under its own name; the framework's zero fill
    // (Fill(Shape(weight), Cast(0))) is serialized in the graph: a string Const of a few bytes,
    // nothing computed in init
    TensorProto zeros = uniformInit(hostInitValue(r.graphDef(), "dense0_kernel-m"));
    assertThat(zeros.getDtype()).isEqualTo(DataType.DT_FLOAT);
    assertThat(zeros.getTensorShape().getDimList()).extracting(d -> d.getSize())
        .containsExactly(256L, 256L);
    assertThat(zeros.getTensorContent().isEmpty() && zeros.getFloatValCount() == 0).isTrue();
    // a second rewrite leaves the graph as it is
    assertThat(SlotOffload.rewrite(r.graphDef(), tg.manifest().runOps(), 0).changed())
        .isFalse();
  }

  /**
   * The model sees the slots as TensorFlow holds them: no longer resident for the whole step,
   * but each one allocated by its parse and alive until its free runs, after its update; and the
   * zero fills init serializes into the host copies are not held for the session (one per
   * weight, the two slots' fills merged, as {@link InitHeldConstants} holds them as given).
   */
  @Test
  void theModelHoldsEachSlotFromItsParseToItsFree() {
    TrainingGraph tg = AdamNet.mlp(64, 256, 4);
    SlotOffload.Result r = SlotOffload.rewrite(tg.graphDef(), tg.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES);
    DataflowGraph before = model(tg.graphDef(), tg.manifest());
    DataflowGraph after = model(r.graphDef(), tg.manifest());
    assertThat(GraphStats.of(before).parameterBytes() - GraphStats.of(after).parameterBytes())
        .isEqualTo(r.bytes());
    assertThat(held(before) - held(after)).isEqualTo(4 * 256 * 256 * 4L);
    Op parse = after.op(SlotOffload.SCOPE + "dense0_kernel-m/parse").orElseThrow();
    assertThat(parse.output(0).bytes()).isEqualTo(256 * 256 * 4L);
    assertThat(parse.output(0).persistent()).isFalse();
    int[] order = after.topologicalOrder();
    Liveness.Interval life = Liveness.intervals(after, order).stream()
        .filter(i -> i.tensor().op() == parse.id()).findFirst().orElseThrow();
    int[] pos = new int[after.size()];
    for (int i = 0; i < order.length; i++) {
      pos[order[i]] = i;
    }
    int update = java.util.Arrays.stream(after.consumers(new TensorId(
        after.op(SlotOffload.SCOPE + "dense0_kernel-m/in").orElseThrow().id(), 0)))
        .filter(c -> after.op(c).type().equals("ApplyAdam")).findFirst().orElseThrow();
    assertThat(life.lastUse()).isEqualTo(pos[after.op(SlotOffload.SCOPE + "dense0_kernel-m/free")
        .orElseThrow().id()]).isGreaterThan(pos[update]);
  }

  /**
   * Four steps of the Adam MLP with its slots on the host compute the losses, weights and slots
   * of the graph as given bit for bit (the slots read through the {@code /value} parse that
   * checkpoints use).
   */
  @Test
  void aStepWithItsAdamSlotsOnTheHostComputesTheSameBits() {
    TrainingGraph tg = AdamNet.mlp(64, 256, 4);
    SlotOffload.Result r = SlotOffload.rewrite(tg.graphDef(), tg.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES);
    List<String> names = List.of("dense1_kernel", "dense1_kernel-m", "dense1_kernel-v");
    Run given = steps(tg.graphDef(), tg.manifest(), 4, names);
    Run offloaded = steps(r.graphDef(), tg.manifest(), 4, List.of("dense1_kernel",
        SlotOffload.valueOf("dense1_kernel-m"), SlotOffload.valueOf("dense1_kernel-v")));
    assertThat(offloaded.losses()).containsExactlyElementsOf(given.losses());
    for (int i = 0; i < names.size(); i++) {
      assertThat(offloaded.values().get(i)).as(names.get(i))
          .containsExactly(given.values().get(i));
    }
    // the slots moved: Adam's moments are not zero after four steps
    assertThat(given.values().get(1)).isNotEqualTo(new float[256 * 256]);
  }

  /** Momentum's accumulators (SlotNet, Python-style zero-filled slots) go the same way. */
  @Test
  void momentumSlotsGoToTheHostWithTheSameLosses() {
    TrainingGraph tg = SlotNet.build(16, 256, 512);
    SlotOffload.Result r = SlotOffload.rewrite(tg.graphDef(), tg.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES);
    assertThat(r.slots()).contains("w0_momentum");
    assertThat(TfTests.losses(r.graphDef(), tg.manifest()))
        .containsExactlyElementsOf(TfTests.losses(tg.graphDef(), tg.manifest()));
  }

  /**
   * A slot initialised to a uniform value gets it from a string Const in the graph, its
   * serialized form of a few bytes, not from an op init computes on the device: init then
   * allocates nothing of the slot's size before the step (measured on LeNet: a 12.8 MiB zero
   * fill in init grew an allocator region of its own). Zeros by {@code Fill} (Python's
   * {@code tf.zeros}) and by {@code ZerosLike}, and a non-zero fill (0.25, which TensorFlow
   * repeats from one value), give the losses of the graph as given bit for bit; a weight's random
   * initial value is still computed and serialized in init.
   */
  @Test
  void aUniformInitialValueIsSerializedInTheGraphWithTheSameLosses() throws Exception {
    TrainingGraph fill = SlotNet.build(16, 256, 512);
    GraphDef quarter = withFillValue(fill.graphDef(), "w0_momentum", 0.25f);
    for (GraphDef gd : List.of(fill.graphDef(), SlotNet.build(16, 256, 512, true).graphDef(),
        quarter)) {
      SlotOffload.Result r = SlotOffload.rewrite(gd, fill.manifest().runOps(),
          SlotOffload.DEFAULT_MIN_BYTES);
      assertThat(r.slots()).contains("w0_momentum");
      TensorProto value = uniformInit(hostInitValue(r.graphDef(), "w0_momentum"));
      assertThat(value.getTensorShape().getDimList()).extracting(d -> d.getSize())
          .containsExactly(256L, 512L);
      assertThat(value.getFloatValList()).containsExactlyElementsOf(
          gd == quarter ? List.of(0.25f) : List.of());
      assertThat(TfTests.losses(r.graphDef(), fill.manifest()))
          .containsExactlyElementsOf(TfTests.losses(gd, fill.manifest()));
    }
    // a 16 MiB slot's Fill, kept from constant folding by InitConstants' wrapper, is read
    // through it
    TrainingGraph large = SlotNet.build(16, 4096, 1024);
    InitConstants.Result kept = InitConstants.rewrite(large.graphDef(),
        large.manifest().runOps());
    assertThat(kept.fills()).hasSize(1);
    SlotOffload.Result r = SlotOffload.rewrite(kept.graphDef(), large.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES);
    assertThat(uniformInit(hostInitValue(r.graphDef(), "w0_momentum")).getTensorShape()
        .getDimList())
        .extracting(d -> d.getSize()).containsExactly(4096L, 1024L);
    assertThat(TfTests.losses(r.graphDef(), large.manifest()))
        .containsExactlyElementsOf(TfTests.losses(large.graphDef(), large.manifest()));
    // the 0.25 start changes the losses: the check above compares the start it was given
    assertThat(TfTests.losses(quarter, fill.manifest()))
        .isNotEqualTo(TfTests.losses(fill.graphDef(), fill.manifest()));
    TrainingGraph tiny = TinyNet.build(64, 256, 4);
    SlotOffload.Result w = SlotOffload.rewrite(tiny.graphDef(), tiny.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES, true);
    assertThat(hostInitValue(w.graphDef(), "w2").getOp()).isEqualTo("SerializeTensor");
  }

  /**
   * The node whose value the initializer of slot {@code slot}'s host copy assigns (the
   * initializer keeps its name; the offload's own write-back, under its scope, is not it).
   */
  private static NodeDef hostInitValue(GraphDef gd, String slot) {
    NodeDef init = gd.getNodeList().stream()
        .filter(x -> x.getOp().equals("Assign") && x.getInputCount() > 1
            && x.getInput(0).equals(SlotOffload.hostOf(slot)))
        .filter(x -> !x.getName().startsWith(SlotOffload.SCOPE)).findFirst().orElseThrow();
    return TfTests.nodes(gd).get(GraphImporter.opName(init.getInput(1)));
  }

  /** The initial value in a host copy initializer's string Const {@code c}, parsed. */
  private static TensorProto uniformInit(NodeDef c) {
    assertThat(c.getOp()).isEqualTo("Const");
    assertThat(c.getSerializedSize()).isLessThan(400);
    try {
      return TensorProto.parseFrom(c.getAttrOrThrow("value").getTensor().getStringVal(0));
    } catch (com.google.protobuf.InvalidProtocolBufferException e) {
      throw new AssertionError(e);
    }
  }

  /** {@code gd} with the scalar Const that slot {@code slot}'s initial Fill fills with set. */
  private static GraphDef withFillValue(GraphDef gd, String slot, float value) {
    Map<String, NodeDef> n = TfTests.nodes(gd);
    NodeDef assign = gd.getNodeList().stream()
        .filter(x -> x.getOp().equals("Assign") && x.getInput(0).equals(slot))
        .findFirst().orElseThrow();
    NodeDef fill = n.get(GraphImporter.opName(assign.getInput(1)));
    assertThat(fill.getOp()).isEqualTo("Fill");
    String constName = GraphImporter.opName(fill.getInput(1));
    GraphDef.Builder b = gd.toBuilder();
    for (int i = 0; i < b.getNodeCount(); i++) {
      if (b.getNode(i).getName().equals(constName)) {
        b.setNode(i, b.getNode(i).toBuilder().putAttr("value", AttrValue.newBuilder()
            .setTensor(TensorProto.newBuilder().setDtype(DataType.DT_FLOAT)
                .setTensorShape(TensorShapeProto.getDefaultInstance()).addFloatVal(value))
            .build()));
      }
    }
    return b.build();
  }

  /**
   * A slot the step reads anywhere else than at its update stays on the device (a fetched slot
   * would read the empty tensor), and so do slots below the size limit.
   */
  @Test
  void aSlotTheStepReadsElsewhereOrASmallOneStays() {
    TrainingGraph tg = AdamNet.mlp(64, 256, 4);
    GraphDef gd = tg.graphDef().toBuilder().addNode(NodeDef.newBuilder().setName("peek")
        .setOp("Identity").addInput("dense2_kernel-m")
        .putAttr("T", tg.graphDef().getNodeList().stream()
            .filter(x -> x.getName().equals("dense2_kernel-m")).findFirst().orElseThrow()
            .getAttrOrThrow("dtype"))).build();
    Set<String> targets = new HashSet<>(tg.manifest().runOps());
    targets.add("peek");
    SlotOffload.Result r = SlotOffload.rewrite(gd, targets, SlotOffload.DEFAULT_MIN_BYTES);
    assertThat(r.slots()).hasSize(7).doesNotContain("dense2_kernel-m");
    assertThat(SlotOffload.rewrite(tg.graphDef(), tg.manifest().runOps(), 300 * 1024)
        .changed()).isFalse();
    assertThat(SlotOffload.rewrite(tg.graphDef(), Set.of(), 0).changed()).isFalse();
  }

  /**
   * With weights, a plain-SGD MLP's weights of at least 64 KiB go too (w1..w3, 256 KiB each; w0
   * and the logits' w4 are below): the update reads each through its assign as a slot's, every
   * other reader of the step (the forward MatMul, the gradient MatMul) through a parse of the
   * host copy made once the reader's other input is there, and the host copy is written back
   * only after those parses. Without weights nothing changes (plain SGD has no slots).
   */
  @Test
  void withWeightsEachReaderParsesTheHostCopyJustBeforeIt() {
    TrainingGraph tg = TinyNet.build(64, 256, 4);
    assertThat(SlotOffload.rewrite(tg.graphDef(), tg.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES).changed()).isFalse();
    assertThat(SlotOffload.weightsQualify(tg.graphDef(), tg.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES)).isTrue();
    SlotOffload.Result r = SlotOffload.rewrite(tg.graphDef(), tg.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES, true);
    assertThat(r.slots()).isEmpty();
    assertThat(r.weights()).containsExactlyInAnyOrder("w1", "w2", "w3");
    assertThat(r.weightBytes()).isEqualTo(3 * 256 * 256 * 4L);
    Map<String, NodeDef> n = TfTests.nodes(r.graphDef());
    String p = SlotOffload.SCOPE + "w2";
    assertThat(n.get("layer2").getInput(1)).startsWith(p + "/read_");
    List<NodeDef> readers = r.graphDef().getNodeList().stream()
        .filter(x -> !x.getName().startsWith(SlotOffload.SCOPE)
            && x.getInputList().stream().anyMatch(i -> i.startsWith(p + "/read_")))
        .toList();
    assertThat(readers).hasSize(2); // the forward MatMul and the gradient's
    for (NodeDef reader : readers) {
      String read = reader.getInputList().stream().filter(i -> i.startsWith(p + "/read_"))
          .findFirst().orElseThrow();
      NodeDef parse = n.get(read + "/parse");
      assertThat(parse.getOp()).isEqualTo("ParseTensor");
      assertThat(n.get(read).getOp()).isEqualTo("Reshape");
      // made once the reader's other input is there, not at the step's start
      String other = reader.getInputList().stream().filter(i -> !i.equals(read)
          && !i.startsWith("^")).findFirst().orElseThrow();
      assertThat(parse.getInputList()).contains("^" + GraphImporter.opName(other));
      assertThat(n.get(p + "/out").getInputList()).contains("^" + read + "/parse");
    }
    NodeDef update = r.graphDef().getNodeList().stream()
        .filter(x -> x.getOp().equals("ApplyGradientDescent") && x.getInput(0).equals(p + "/in"))
        .findFirst().orElseThrow();
    assertThat(n.get(p + "/save").getInputList()).contains("^" + update.getName());
    assertThat(n.get("w2").getAttrOrThrow("shape").getShape().getUnknownRank()).isTrue();
    assertThat(n.get("w0").getAttrOrThrow("shape").getShape().getUnknownRank()).isFalse();
    DataflowGraph before = model(tg.graphDef(), tg.manifest());
    DataflowGraph after = model(r.graphDef(), tg.manifest());
    assertThat(GraphStats.of(before).parameterBytes() - GraphStats.of(after).parameterBytes())
        .isEqualTo(r.weightBytes());
    // a read's Reshape shares its parse's buffer, as TensorFlow's Reshape forwards it (traced
    // on the corpus U-Net: the parse allocates, the reshape nothing); a swap-in does not
    for (NodeDef reader : readers) {
      String read = GraphImporter.opName(reader.getInputList().stream()
          .filter(i -> i.startsWith(p + "/read_")).findFirst().orElseThrow());
      Op reshape = after.op(read).orElseThrow();
      assertThat(BufferAliases.source(after, reshape, 0))
          .isEqualTo(new TensorId(after.op(read + "/parse").orElseThrow().id(), 0));
    }
  }

  /**
   * Four steps of the plain-SGD MLP with its weights on the host compute the losses and weights
   * of the graph as given bit for bit (weights read through their {@code /value} parses); so do
   * four of the framework-Adam MLP with its weights and slots there.
   */
  @Test
  void aStepWithItsWeightsOnTheHostComputesTheSameBits() {
    TrainingGraph tg = TinyNet.build(64, 256, 4);
    SlotOffload.Result r = SlotOffload.rewrite(tg.graphDef(), tg.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES, true);
    assertThat(r.weights()).hasSize(3);
    Run given = steps(tg.graphDef(), tg.manifest(), 4, List.of("w1", "w3", "w4"));
    Run offloaded = steps(r.graphDef(), tg.manifest(), 4, List.of(SlotOffload.valueOf("w1"),
        SlotOffload.valueOf("w3"), "w4"));
    assertThat(offloaded.losses()).containsExactlyElementsOf(given.losses());
    for (int i = 0; i < 3; i++) {
      assertThat(offloaded.values().get(i)).containsExactly(given.values().get(i));
    }
    // the framework's Adam: weights and slots on the host together (its slots' initialisers
    // read each weight's shape, which becomes a constant)
    TrainingGraph adam = AdamNet.mlp(64, 256, 4);
    SlotOffload.Result both = SlotOffload.rewrite(adam.graphDef(), adam.manifest().runOps(),
        SlotOffload.DEFAULT_MIN_BYTES, true);
    assertThat(both.weights()).contains("dense1_kernel");
    assertThat(both.slots()).contains("dense1_kernel-m");
    Run adamGiven = steps(adam.graphDef(), adam.manifest(), 4, List.of("dense1_kernel"));
    Run adamBoth = steps(both.graphDef(), adam.manifest(), 4,
        List.of(SlotOffload.valueOf("dense1_kernel")));
    assertThat(adamBoth.losses()).containsExactlyElementsOf(adamGiven.losses());
    assertThat(adamBoth.values().get(0)).containsExactly(adamGiven.values().get(0));
  }

  /**
   * A weight stays on the device where the step reads it after its update (that read sees the
   * updated value), and so does one whose value an op outside the step passes on to a
   * variable's initializer; an op outside the step that only reads one (an evaluation, an unused
   * gradient) parses the host copy as it is when it runs, which the step's write-back does not
   * wait for.
   */
  @Test
  void weightsReadAfterTheUpdateOrByAnInitializerStayAndOtherReadsParseTheHostCopy() {
    TrainingGraph tg = TinyNet.build(64, 256, 4);
    NodeDef update2 = tg.graphDef().getNodeList().stream()
        .filter(x -> x.getOp().equals("ApplyGradientDescent") && x.getInput(0).equals("w2"))
        .findFirst().orElseThrow();
    var dtype = tg.graphDef().getNodeList().stream().filter(x -> x.getName().equals("w1"))
        .findFirst().orElseThrow().getAttrOrThrow("dtype");
    GraphDef gd = tg.graphDef().toBuilder()
        .addNode(NodeDef.newBuilder().setName("after_update").setOp("Identity").addInput("w2")
            .addInput("^" + update2.getName()).putAttr("T", dtype))
        .addNode(NodeDef.newBuilder().setName("peek").setOp("Identity").addInput("w1")
            .putAttr("T", dtype))
        // a moving average that starts at w3's value: init reads w3 (through an op of its own)
        .addNode(NodeDef.newBuilder().setName("w3_avg").setOp("VariableV2")
            .putAttr("dtype", dtype).putAttr("shape", tg.graphDef().getNodeList().stream()
                .filter(x -> x.getName().equals("w3")).findFirst().orElseThrow()
                .getAttrOrThrow("shape")))
        .addNode(NodeDef.newBuilder().setName("w3_copy").setOp("Identity").addInput("w3")
            .putAttr("T", dtype))
        .addNode(NodeDef.newBuilder().setName("w3_avg_init").setOp("Assign").addInput("w3_avg")
            .addInput("w3_copy").putAttr("T", dtype)).build();
    Set<String> targets = new HashSet<>(tg.manifest().runOps());
    targets.add("after_update");
    SlotOffload.Result r = SlotOffload.rewrite(gd, targets, SlotOffload.DEFAULT_MIN_BYTES, true);
    // w3 stays: init would parse its host copy before filling it
    assertThat(r.weights()).containsExactly("w1");
    Map<String, NodeDef> n = TfTests.nodes(r.graphDef());
    String read = n.get("peek").getInput(0);
    assertThat(read).startsWith(SlotOffload.SCOPE + "w1/read_");
    assertThat(n.get(SlotOffload.SCOPE + "w1/out").getInputList())
        .doesNotContain("^" + read + "/parse");
    // fetched after four steps, it reads the weight the step left
    Run offloaded = steps(r.graphDef(), tg.manifest(), 4, List.of("peek"));
    Run given = steps(gd, tg.manifest(), 4, List.of("w1"));
    assertThat(offloaded.values().get(0)).containsExactly(given.values().get(0));
  }

  /** The graph model of {@code gd} for the step {@code m} runs. */
  private static DataflowGraph model(GraphDef gd, Manifest m) {
    return GraphImporter.importGraph(gd, m.feedShapes(), -1, "gradients", m.runOps());
  }

  private static long held(DataflowGraph g) {
    long bytes = 0;
    for (Op op : g.ops()) {
      if (op.type().equals(dev.lms4j.core.memory.BfcReplay.HELD)) {
        bytes += op.output(0).bytes();
      }
    }
    return bytes;
  }

  /**
   * On a GPU (structurally only: no GPU here) the host copy, its parse and serialization stay
   * on the CPU, where TensorFlow has string kernels; the slot, its assigns and the update keep
   * the GPU; so do a weight's parses and host copy, its reshapes on the GPU.
   */
  @Test
  void onAGpuTheHostSideStaysOnTheCpu() {
    TrainingGraph tg = AdamNet.mlp(64, 256, 4);
    GraphDef.Builder b = tg.graphDef().toBuilder();
    for (int i = 0; i < b.getNodeCount(); i++) {
      b.setNode(i, b.getNode(i).toBuilder().setDevice("/device:GPU:0"));
    }
    Map<String, NodeDef> n = TfTests.nodes(SlotOffload.rewrite(b.build(),
        tg.manifest().runOps(), SlotOffload.DEFAULT_MIN_BYTES).graphDef());
    String p = SlotOffload.SCOPE + "dense0_kernel-m";
    for (String cpu : List.of(SlotOffload.hostOf("dense0_kernel-m"), p + "/parse", p + "/save",
        p + "/out", SlotOffload.valueOf("dense0_kernel-m"))) {
      assertThat(n.get(cpu).getDevice()).as(cpu).isEqualTo("/device:CPU:0");
    }
    for (String gpu : List.of("dense0_kernel-m", p + "/in", p + "/free")) {
      assertThat(n.get(gpu).getDevice()).as(gpu).isEqualTo("/device:GPU:0");
    }
    assertThat(n.values().stream().filter(x -> x.getOp().equals("SerializeTensor"))
        .allMatch(x -> x.getDevice().equals("/device:CPU:0"))).isTrue();

    // with the weights: each read's parse on the CPU, its reshape (the copy to the GPU) and the
    // weight on the GPU
    Map<String, NodeDef> w = TfTests.nodes(SlotOffload.rewrite(b.build(),
        tg.manifest().runOps(), SlotOffload.DEFAULT_MIN_BYTES, true).graphDef());
    String k = SlotOffload.SCOPE + "dense1_kernel";
    assertThat(w.get(k + "/read_0/parse").getDevice()).isEqualTo("/device:CPU:0");
    assertThat(w.get(k + "/read_0").getDevice()).isEqualTo("/device:GPU:0");
    assertThat(w.get("dense1_kernel").getDevice()).isEqualTo("/device:GPU:0");
    assertThat(w.get(SlotOffload.hostOf("dense1_kernel")).getDevice())
        .isEqualTo("/device:CPU:0");
  }

  /** Losses of {@code steps} steps and the values of {@code fetch} after them. */
  private record Run(List<Double> losses, List<float[]> values) {}

  private static Run steps(GraphDef gd, Manifest m, int steps, List<String> fetch) {
    List<Double> losses = new ArrayList<>();
    List<float[]> values = new ArrayList<>();
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      try (Session s = new Session(g, SessionConfigs.lms())) {
        s.runner().addTarget(m.init()).run();
        for (int step = 1; step <= steps; step++) {
          Session.Runner r = s.runner();
          List<Tensor> feeds = SyntheticFeeds.feed(r, m, 1, step);
          try (Result res = r.fetch(m.loss()).addTarget(m.trainOp()).run()) {
            losses.add((double) floats(res.get(0))[0]);
          } finally {
            feeds.forEach(Tensor::close);
          }
        }
        Session.Runner r = s.runner();
        fetch.forEach(f -> r.fetch(f, 0));
        try (Result res = r.run()) {
          for (int i = 0; i < fetch.size(); i++) {
            values.add(floats(res.get(i)));
          }
        }
      }
    }
    return new Run(losses, values);
  }

  private static float[] floats(Tensor t) {
    FloatDataBuffer b = t.asRawTensor().data().asFloats();
    float[] a = new float[(int) b.size()];
    b.read(a);
    return a;
  }
}
