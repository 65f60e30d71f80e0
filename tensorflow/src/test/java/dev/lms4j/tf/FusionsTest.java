package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * {@link Fusions}: which ops the chain leaves alone so TensorFlow fuses and folds them as it does
 * for the graph as given, and {@link SerialOrder#afterMerges}: a merged bias gradient is not
 * ordered before the op it is merged into.
 */
class FusionsTest {

  private static NodeDef node(String name, String op, String... inputs) {
    return NodeDef.newBuilder().setName(name).setOp(op).addAllInput(Arrays.asList(inputs))
        .build();
  }

  private static GraphDef graph(NodeDef... nodes) {
    return GraphDef.newBuilder().addAllNode(Arrays.asList(nodes)).build();
  }

  /** conv (+ bias + relu), a conv read twice, a filter gradient and the bias gradient. */
  private static GraphDef convLayer() {
    return graph(
        node("x", "Placeholder"),
        node("w", "VariableV2"),
        node("w/read", "Identity", "w"),
        node("b", "VariableV2"),
        node("conv", "Conv2D", "x", "w/read"),
        node("bias", "BiasAdd", "conv", "b"),
        node("relu", "Relu", "bias"),
        node("conv2", "Conv2D", "relu", "w/read"),
        node("use1", "Neg", "conv2"),
        node("use2", "Square", "conv2"),
        node("loss", "AddN", "use1", "use2"),
        node("g", "ReluGrad", "loss", "relu"),
        node("g/id", "Identity", "g"),
        node("sizes", "Const"),
        node("half", "Cast", "sizes"),
        node("dw", "Conv2DBackpropFilter", "x", "sizes", "g/id"),
        node("db", "BiasAddGrad", "g"),
        node("upd_w", "ApplyGradientDescent", "w", "half", "dw"),
        node("upd_b", "ApplyGradientDescent", "b", "half", "db"),
        node("train", "NoOp", "^upd_w", "^upd_b"));
  }

  @Test
  void namesFusedPatternsForwardingAndConstantOpsButNotAConvReadTwice() {
    GraphDef gd = convLayer();
    Set<String> step = GraphImporter.ancestors(gd, Set.of("train", "loss"));
    Set<String> out = Fusions.of(gd, step);
    // conv + bias add + its activation: one _FusedConv2D
    assertThat(out).contains("conv", "bias", "relu");
    // a conv read by two ops is not fused: it stays in the chain
    assertThat(out).doesNotContain("conv2", "use1", "use2", "loss", "g");
    // the filter gradient and the bias gradient of one incoming gradient (seen through g/id)
    assertThat(out).contains("dw", "db");
    assertThat(Fusions.merges(gd)).containsExactly(Map.entry("db", "dw"));
    // identities the pruner removes; a cast of a constant stays (constant folding keeps its
    // control inputs, and a large one is not folded: it would run at the step's start)
    assertThat(out).contains("w/read", "g/id").doesNotContain("half");
    // updates are chained
    assertThat(out).doesNotContain("upd_w", "upd_b", "train");
  }

  @Test
  void aReaderOfARefVariableThatIsNotAnAncestorOfItsUpdateStaysChained() {
    // conv reads w (through its identity) but nothing the update of w needs comes from it:
    // only the chain keeps it before the update
    GraphDef gd = graph(
        node("x", "Placeholder"),
        node("w", "VariableV2"),
        node("w/read", "Identity", "w"),
        node("b", "Const"),
        node("conv", "Conv2D", "x", "w/read"),
        node("bias", "BiasAdd", "conv", "b"),
        node("lr", "Const"),
        node("grad", "Neg", "x"),
        node("upd", "ApplyGradientDescent", "w", "lr", "grad"),
        node("train", "NoOp", "^upd", "^bias"));
    Set<String> step = GraphImporter.ancestors(gd, Set.of("train"));
    assertThat(Fusions.of(gd, step)).doesNotContain("conv").contains("bias", "w/read");
    // an update that the step does not run (an initialiser's) does not count
    assertThat(Fusions.of(gd, Set.of("x", "w", "w/read", "b", "conv", "bias")))
        .contains("conv", "bias");
  }

  @Test
  void aMergedBiasGradientAndWhatReadsItMoveAfterTheOpItIsMergedInto() {
    GraphDef gd = convLayer();
    DataflowGraph model = model(gd);
    int db = model.opOrThrow("db").id();
    int updB = model.opOrThrow("upd_b").id();
    int dw = model.opOrThrow("dw").id();
    int[] schedule = dev.lms4j.core.graph.Levels.of(model).schedule();
    // a schedule with the bias gradient and its update first, then the filter gradient
    int[] early = java.util.stream.IntStream.concat(java.util.stream.IntStream.of(db, updB),
        Arrays.stream(schedule).filter(id -> id != db && id != updB)).toArray();
    // db and upd_b read only g, so this is still a topological order of the graph
    int[] given = reorderTopologically(model, early);
    List<Integer> before = Arrays.stream(given).boxed().toList();
    assertThat(before.indexOf(db)).isLessThan(before.indexOf(dw));
    int[] moved = SerialOrder.afterMerges(model, given, Fusions.merges(gd));
    List<Integer> order = Arrays.stream(moved).boxed().toList();
    assertThat(order).hasSize(schedule.length);
    assertThat(order.indexOf(db)).isGreaterThan(order.indexOf(dw));
    assertThat(order.indexOf(updB)).isGreaterThan(order.indexOf(db));
    // without merges the schedule is kept as it is
    assertThat(SerialOrder.afterMerges(model, schedule, Map.of())).isSameAs(schedule);
  }

  /** The graph as the model sees it: one 4-byte output per op, control edges as written. */
  private static DataflowGraph model(GraphDef gd) {
    var b = DataflowGraph.builder();
    for (NodeDef n : gd.getNodeList()) {
      List<String> data = n.getInputList().stream().filter(in -> !in.startsWith("^")).toList();
      b.op(n.getName(), n.getOp(), dev.lms4j.core.graph.OpCategory.FORWARD, data,
          new dev.lms4j.core.graph.Tensor("float32", new long[0], 4, false));
    }
    for (NodeDef n : gd.getNodeList()) {
      n.getInputList().stream().filter(in -> in.startsWith("^"))
          .forEach(in -> b.controlEdge(in.substring(1), n.getName()));
    }
    return b.build();
  }

  /** {@code wanted}, each op moved after its inputs: the order closest to it that is valid. */
  private static int[] reorderTopologically(DataflowGraph model, int[] wanted) {
    java.util.LinkedHashSet<Integer> done = new java.util.LinkedHashSet<>();
    java.util.List<Integer> todo = new java.util.ArrayList<>(Arrays.stream(wanted).boxed()
        .toList());
    while (!todo.isEmpty()) {
      for (int i = 0; i < todo.size(); i++) {
        int id = todo.get(i);
        if (Arrays.stream(model.predecessors(id)).allMatch(done::contains)) {
          done.add(id);
          todo.remove(i);
          break;
        }
      }
    }
    return done.stream().mapToInt(Integer::intValue).toArray();
  }
}
