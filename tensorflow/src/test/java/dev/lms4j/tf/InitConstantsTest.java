package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.memory.BfcReplay;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;

/** {@link InitConstants} on hand-written GraphDefs and on {@link SlotNet}, in this process. */
class InitConstantsTest {
  private static final long MIB = 1 << 20;

  /**
   * SlotNet(64, 4096, 1024): layer 0's momentum slot is {@code [4096, 1024]} float (16 MiB),
   * zero-filled in init: rewired. Layer 1's slot ({@code [1024, 10]}, 40 KiB) is not above 10 MiB
   * (the graph optimizer folds it anyway): left alone. The step's own Fill ({@code [64, 1024]}
   * ones) runs every step: left alone.
   */
  @Test
  void rewiresTheLargeInitFillOnly() {
    TrainingGraph tg = SlotNet.build(64, 4096, 1024);
    Map<String, NodeDef> before = TfTests.nodes(tg.graphDef());
    InitConstants.Result r = InitConstants.rewrite(tg.graphDef(), tg.manifest().runOps());

    assertThat(r.fills()).containsExactly("w0_momentum_init/Fill");
    assertThat(r.bytes()).isEqualTo(16 * MIB);
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    assertThat(after).hasSize(before.size() + 1);
    NodeDef fill = after.get("w0_momentum_init/Fill");
    NodeDef nofold = after.get("w0_momentum_init/Fill/lms_nofold");
    String value = before.get("w0_momentum_init/Fill").getInput(1);
    assertThat(fill.getInputList()).containsExactly(
        before.get("w0_momentum_init/Fill").getInput(0), nofold.getName());
    assertThat(nofold.getOp()).isEqualTo("PlaceholderWithDefault");
    assertThat(nofold.getInputList()).containsExactly(value);
    assertThat(nofold.getDevice()).isEqualTo(fill.getDevice());
    assertThat(nofold.getAttrOrThrow("dtype").getType()).isEqualTo(DataType.DT_FLOAT);
    assertThat(nofold.getAttrOrThrow("shape").getShape().getDimCount()).isZero();
    assertThat(nofold.getAttrOrThrow("shape").getShape().getUnknownRank()).isFalse();
    // everything else as it was
    before.forEach((name, n) -> {
      if (!name.equals("w0_momentum_init/Fill")) {
        assertThat(after.get(name)).as(name).isEqualTo(n);
      }
    });
    assertThat(before.get("step/Fill").getOp()).isEqualTo("Fill");
    assertThat(before.get("w1_momentum_init/Fill").getOp()).isEqualTo("Fill");

    // idempotent: the value already comes through lms_nofold
    InitConstants.Result again = InitConstants.rewrite(r.graphDef(), tg.manifest().runOps());
    assertThat(again.changed()).isFalse();
    assertThat(again.graphDef()).isSameAs(r.graphDef());
    // the step unknown: nothing changes
    InitConstants.Result unknown = InitConstants.rewrite(tg.graphDef(), List.of());
    assertThat(unknown.changed()).isFalse();
    assertThat(unknown.graphDef()).isSameAs(tg.graphDef());
  }

  /** The rewritten graph initialises the same values: three steps give the same losses. */
  @Test
  void lossesAreBitIdentical() {
    TrainingGraph tg = SlotNet.build(16, 4096, 1024);
    InitConstants.Result r = InitConstants.rewrite(tg.graphDef(), tg.manifest().runOps());
    assertThat(r.changed()).isTrue();
    List<Double> plain = TfTests.losses(tg.graphDef(), tg.manifest());
    assertThat(TfTests.losses(r.graphDef(), tg.manifest())).containsExactlyElementsOf(plain);
  }

  /**
   * SlotNet(16, 4096, 1024) with ZerosLike slots: layer 0's ({@code [4096, 1024]} float, 16 MiB)
   * becomes a Fill of the same name, with int64 dims, a 0 through lms_nofold, and a control edge
   * on the random op it read; layer 1's (20 KiB) stays. Same losses; idempotent.
   */
  @Test
  void zerosLikeBecomesAnUnfoldedFill() {
    TrainingGraph tg = SlotNet.build(16, 4096, 1024, true);
    Map<String, NodeDef> before = TfTests.nodes(tg.graphDef());
    InitConstants.Result r = InitConstants.rewrite(tg.graphDef(), tg.manifest().runOps());
    assertThat(r.fills()).containsExactly("w0_momentum_init/ZerosLike");
    assertThat(r.bytes()).isEqualTo(16 * MIB);
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    assertThat(after).hasSize(before.size() + 3);
    String input = before.get("w0_momentum_init/ZerosLike").getInput(0);
    NodeDef fill = after.get("w0_momentum_init/ZerosLike");
    assertThat(fill.getOp()).isEqualTo("Fill");
    assertThat(fill.getInputList()).containsExactly("w0_momentum_init/ZerosLike/lms_dims",
        "w0_momentum_init/ZerosLike/lms_nofold", "^" + input.replaceAll(":0$", ""));
    TensorProto dims = after.get("w0_momentum_init/ZerosLike/lms_dims").getAttrOrThrow("value")
        .getTensor();
    assertThat(dims.getDtype()).isEqualTo(DataType.DT_INT64);
    assertThat(dims.getInt64ValList()).containsExactly(4096L, 1024L);
    assertThat(fill.getAttrOrThrow("index_type").getType()).isEqualTo(DataType.DT_INT64);
    TensorProto value = after.get("w0_momentum_init/ZerosLike/lms_value").getAttrOrThrow("value")
        .getTensor();
    assertThat(value.getFloatValList()).containsExactly(0f);
    assertThat(after.get("w0_momentum_init/ZerosLike/lms_nofold").getInputList())
        .containsExactly("w0_momentum_init/ZerosLike/lms_value");
    assertThat(after.get("w1_momentum_init/ZerosLike"))
        .isEqualTo(before.get("w1_momentum_init/ZerosLike"));

    assertThat(InitConstants.rewrite(r.graphDef(), tg.manifest().runOps()).changed()).isFalse();
    List<Double> plain = TfTests.losses(tg.graphDef(), tg.manifest());
    assertThat(TfTests.losses(r.graphDef(), tg.manifest())).containsExactlyElementsOf(plain);
  }

  /**
   * A hand-written graph: an init Fill (2048 x 2048 float, 16 MiB) and one the step reaches only
   * by a control edge ({@code ^fill2}); run ops given in the {@code name:0} and {@code ^name}
   * forms. Fills whose dims or value are not Consts, or whose value is not output 0, are left.
   */
  @Test
  void stepsReachThroughControlEdgesAndTensorNames() {
    GraphDef gd = GraphDef.newBuilder()
        .addNode(dims("dims", DataType.DT_INT32, 2048, 2048))
        .addNode(scalar("zero"))
        .addNode(node("v", "VariableV2"))
        .addNode(node("fill", "Fill", "dims", "zero:0").setDevice("/device:CPU:0"))
        .addNode(node("assign", "Assign", "v", "fill"))
        .addNode(node("init", "NoOp", "^assign"))
        .addNode(node("fill2", "Fill", "dims", "zero"))
        .addNode(node("read", "Identity", "v", "^fill2"))
        .addNode(node("train", "NoOp", "^read"))
        .addNode(node("x", "Placeholder"))
        .addNode(node("fill3", "Fill", "x", "zero"))
        .addNode(node("fill4", "Fill", "dims", "x"))
        .addNode(node("fill5", "Fill", "dims", "zero:1"))
        // a large Fill of Consts that neither the step nor an initializer runs: nothing holds it
        .addNode(node("orphan", "Fill", "dims", "zero"))
        .addNode(node("orphan_zeros", "ZerosLike", "orphan"))
        .build();
    InitConstants.Result r = InitConstants.rewrite(gd, Set.of("read:0", "^train"));
    assertThat(r.fills()).containsExactly("fill");
    assertThat(r.bytes()).isEqualTo(16 * MIB);
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    assertThat(after.get("fill").getInputList()).containsExactly("dims", "fill/lms_nofold");
    assertThat(after.get("fill/lms_nofold").getInputList()).containsExactly("zero:0");
    assertThat(after.get("fill/lms_nofold").getDevice()).isEqualTo("/device:CPU:0");
    assertThat(after.get("fill2")).isEqualTo(gd.getNode(6));

    assertThatThrownBy(() -> InitConstants.rewrite(gd, Set.of("nope")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'nope'");
    // with the step unknown, or an init Fill the step also runs, nothing changes
    assertThat(InitConstants.rewrite(gd, Set.of()).changed()).isFalse();
    assertThat(InitConstants.rewrite(gd, Set.of("train", "init")).changed()).isFalse();
  }

  /**
   * The graph model holds what init leaves folded ({@link InitHeldConstants}, as
   * {@link BfcReplay#HELD} ops under the initializer's name): SlotNet(16, 4096, 1024)'s 16 MiB
   * momentum slot Fill until it is kept from folding; layer 1's 40 KiB slot Fill, which the graph
   * optimizer folds whatever InitConstants does, in both. The allocator replay's need drops by
   * at least the 16 MiB the rewrite frees.
   */
  @Test
  void theModelHoldsWhatInitLeavesFolded() {
    TrainingGraph tg = SlotNet.build(16, 4096, 1024);
    DataflowGraph given = model(tg.graphDef(), tg);
    Op held = given.opOrThrow("w0_momentum_init/Fill");
    assertThat(held.type()).isEqualTo(BfcReplay.HELD);
    assertThat(held.inputs()).isEmpty();
    assertThat(held.outputs()).singleElement().satisfies(t -> assertThat(t.bytes())
        .isEqualTo(16 * MIB));
    assertThat(given.opOrThrow("w1_momentum_init/Fill").outputs().get(0).bytes())
        .isEqualTo(1024 * 10 * 4L);

    DataflowGraph kept = model(InitConstants.rewrite(tg.graphDef(), tg.manifest().runOps())
        .graphDef(), tg);
    assertThat(kept.op("w0_momentum_init/Fill")).isEmpty();
    assertThat(kept.opOrThrow("w1_momentum_init/Fill").type()).isEqualTo(BfcReplay.HELD);
    long needGiven = BfcReplay.smallestMib(given, Levels.of(given).schedule(), 1L << 16);
    long needKept = BfcReplay.smallestMib(kept, Levels.of(kept).schedule(), 1L << 16);
    // at least the constant itself; the replay's regions grow from what comes first (30 here)
    assertThat(needGiven - needKept).isGreaterThanOrEqualTo(16L);
  }

  private static DataflowGraph model(GraphDef gd, TrainingGraph tg) {
    return GraphImporter.importGraph(gd, tg.manifest().feedShapes(), -1,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
  }

  /** Dims as int_val, int64_val or tensor_content, int32 or int64; unreadable ones give -1. */
  @Test
  void readsDimsInEveryEncoding() {
    assertThat(InitConstants.elements(dims("d", DataType.DT_INT32, 3, 4, 5))).isEqualTo(60);
    assertThat(InitConstants.elements(dims("d", DataType.DT_INT64, 3136, 1024)))
        .isEqualTo(3136L * 1024);
    assertThat(InitConstants.elements(content("d", DataType.DT_INT32, 3, 4, 5))).isEqualTo(60);
    assertThat(InitConstants.elements(content("d", DataType.DT_INT64, 1L << 20, 3)))
        .isEqualTo(3L << 20);
    // a shorter list repeats its last value, as TensorFlow reads it: [7] of shape [3]
    assertThat(InitConstants.elements(withShape(dims("d", DataType.DT_INT32, 7), 3)))
        .isEqualTo(343);
    // rank 0 fill: shape [0], no values
    assertThat(InitConstants.elements(dims("d", DataType.DT_INT32))).isEqualTo(1);
    assertThat(InitConstants.elements(dims("d", DataType.DT_INT32, 4, -1))).isEqualTo(-1);
    assertThat(InitConstants.elements(withShape(content("d", DataType.DT_INT32, 1, 2), 3)))
        .isEqualTo(-1);
    assertThat(InitConstants.elements(scalar("s"))).isEqualTo(-1);
    assertThat(InitConstants.elements(dims("d", DataType.DT_INT64, 1L << 40, 1L << 40)))
        .isEqualTo(-1);
  }

  private static NodeDef.Builder node(String name, String op, String... inputs) {
    return NodeDef.newBuilder().setName(name).setOp(op).addAllInput(List.of(inputs));
  }

  /** A 1-D int Const holding {@code values} in int_val or int64_val. */
  private static NodeDef dims(String name, DataType dt, long... values) {
    TensorProto.Builder t = TensorProto.newBuilder().setDtype(dt)
        .setTensorShape(shape(values.length));
    for (long v : values) {
      if (dt == DataType.DT_INT32) {
        t.addIntVal((int) v);
      } else {
        t.addInt64Val(v);
      }
    }
    return constant(name, t.build());
  }

  /** A 1-D int Const holding {@code values} in tensor_content (little-endian). */
  private static NodeDef content(String name, DataType dt, long... values) {
    int width = dt == DataType.DT_INT32 ? 4 : 8;
    ByteBuffer b = ByteBuffer.allocate(values.length * width).order(ByteOrder.LITTLE_ENDIAN);
    for (long v : values) {
      if (width == 4) {
        b.putInt((int) v);
      } else {
        b.putLong(v);
      }
    }
    return constant(name, TensorProto.newBuilder().setDtype(dt).setTensorShape(
        shape(values.length)).setTensorContent(ByteString.copyFrom(b.array())).build());
  }

  /** A float scalar Const 0. */
  private static NodeDef scalar(String name) {
    return constant(name, TensorProto.newBuilder().setDtype(DataType.DT_FLOAT)
        .setTensorShape(TensorShapeProto.getDefaultInstance()).addFloatVal(0f).build());
  }

  private static NodeDef withShape(NodeDef c, long n) {
    TensorProto t = c.getAttrOrThrow("value").getTensor().toBuilder()
        .setTensorShape(shape(n)).build();
    return constant(c.getName(), t);
  }

  private static TensorShapeProto shape(long n) {
    return TensorShapeProto.newBuilder()
        .addDim(TensorShapeProto.Dim.newBuilder().setSize(n)).build();
  }

  private static NodeDef constant(String name, TensorProto t) {
    return NodeDef.newBuilder().setName(name).setOp("Const")
        .putAttr("dtype", AttrValue.newBuilder().setType(t.getDtype()).build())
        .putAttr("value", AttrValue.newBuilder().setTensor(t).build()).build();
  }
}
