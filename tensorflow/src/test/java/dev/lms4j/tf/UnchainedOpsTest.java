package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.nn.BiasAddGrad;
import org.tensorflow.op.nn.Conv2dBackpropFilter;
import org.tensorflow.types.TFloat32;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * {@link UnchainedOps}: which ops the chain leaves alone so TensorFlow fuses and folds them as it does
 * for the graph as given, and the model's order of a merged bias gradient.
 */
class UnchainedOpsTest {

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

  /**
   * A batch norm whose output 0 only an activation reads is fused with it (FusedBatchNormEx)
   * whatever reads its statistics: in a recomputation plan the backward pass reads a clone, and
   * the original's other outputs keep the ZerosLike readers of their gradients. Counting those
   * as readers chained 4 batch norms of the zoo's resnet101 (remat at 13 MiB): TensorFlow ran
   * them unfused and the third loss moved (2.2456822 vs 2.2456825).
   */
  @Test
  void namesABatchNormWhoseOutputZeroOnlyAnActivationReads() {
    GraphDef gd = graph(
        node("x", "Placeholder"),
        node("gamma", "Placeholder"),
        node("beta", "Placeholder"),
        node("e", "Const"),
        node("bn", "FusedBatchNormV3", "x", "gamma", "beta", "e", "e"),
        node("relu", "Relu", "bn"),
        node("z1", "ZerosLike", "bn:1"),
        node("z2", "ZerosLike", "bn:2"),
        node("bn2", "FusedBatchNormV3", "relu", "gamma", "beta", "e", "e"),
        node("relu2", "Relu", "bn2"),
        node("grad2", "ReluGrad", "relu2", "bn2:0"),
        node("loss", "AddN", "relu2", "grad2", "z1", "z2"));
    Set<String> out = UnchainedOps.of(gd, GraphImporter.ancestors(gd, Set.of("loss")));
    assertThat(out).contains("bn", "relu");
    // output 0 read twice: not fused, chained
    assertThat(out).doesNotContain("bn2", "relu2", "grad2");
  }

  @Test
  void namesFusedPatternsForwardingAndConstantOpsButNotAConvReadTwice() {
    GraphDef gd = convLayer();
    Set<String> step = GraphImporter.ancestors(gd, Set.of("train", "loss"));
    Set<String> out = UnchainedOps.of(gd, step);
    // conv + bias add + its activation: one _FusedConv2D
    assertThat(out).contains("conv", "bias", "relu");
    // a conv read by two ops is not fused: it stays in the chain
    assertThat(out).doesNotContain("conv2", "use1", "use2", "loss", "g");
    // the filter gradient and the bias gradient of one incoming gradient (seen through g/id)
    assertThat(out).contains("dw", "db");
    assertThat(UnchainedOps.merges(gd)).containsExactly(Map.entry("db", "dw"));
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
    assertThat(UnchainedOps.of(gd, step)).doesNotContain("conv").contains("bias", "w/read");
    // an update that the step does not run (an initialiser's) does not count
    assertThat(UnchainedOps.of(gd, Set.of("x", "w", "w/read", "b", "conv", "bias")))
        .contains("conv", "bias");
  }

  /**
   * The model orders a bias gradient oneDNN merges after the filter gradient it is merged into
   * (a control edge of the model only, not written into the GraphDef), except where the graph
   * already orders the filter gradient after it.
   */
  @Test
  void theModelOrdersAMergedBiasGradientAfterTheFilterGradient() {
    for (boolean filterAfterBias : new boolean[] {false, true}) {
      GraphDef gd;
      try (Graph g = new Graph()) {
        Ops tf = Ops.create(g);
        Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
            Placeholder.shape(Shape.of(1, 4, 4, 2)));
        Placeholder<TFloat32> dy = tf.withName("dy").placeholder(TFloat32.class,
            Placeholder.shape(Shape.of(1, 4, 4, 3)));
        BiasAddGrad<TFloat32> db = tf.withName("db").nn.biasAddGrad(dy);
        Ops tw = filterAfterBias ? tf.withControlDependencies(List.of(db)) : tf;
        Conv2dBackpropFilter<TFloat32> dw = tw.withName("dw").nn.conv2dBackpropFilter(x,
            tf.constant(new int[] {1, 1, 2, 3}), dy, List.of(1L, 1L, 1L, 1L), "SAME");
        tf.withName("train").withControlDependencies(List.of(db, dw)).noOp();
        gd = g.toGraphDef();
      }
      assertThat(UnchainedOps.merges(gd)).containsExactly(Map.entry("db", "dw"));
      DataflowGraph model = GraphImporter.importGraph(gd, Map.of(), 1, "gradients",
          Set.of("train"));
      int dbId = model.opOrThrow("db").id();
      int dwId = model.opOrThrow("dw").id();
      boolean edge = Arrays.stream(model.predecessors(dbId)).anyMatch(p -> p == dwId);
      assertThat(edge).as("filter after bias: " + filterAfterBias).isEqualTo(!filterAfterBias);
      assertThat(TfTests.nodes(gd).get("db").getInputList()).containsExactly("dy");
    }
  }

  /**
   * Which pairs oneDNN's layout pass merges in a graph as written (TensorFlow 2.18's rule, read
   * from its sources and matched against the partition graphs of the corpus U-Net, resnets and
   * DenseNet, as given and scheduled): the two ops read the same op once the model pruner has
   * removed the identities it removes, and wait on the same control inputs.
   */
  @Test
  void aPairMergesWhereTheyReadOneOpAfterPruningAndWaitOnTheSameOps() {
    NodeDef[] base = {
        node("x", "Placeholder"),
        node("dy", "Relu", "x"),
        node("id", "Identity", "dy"),
        node("sizes", "Const"),
        node("dw", "Conv2DBackpropFilter", "x", "sizes", "id"),
        node("db", "BiasAddGrad", "dy")};
    assertThat(UnchainedOps.mergedAsWritten(graph(base))).containsExactly(Map.entry("db", "dw"));
    // an edge leaving the Identity keeps it from the pruner: the two read different ops
    NodeDef[] held = Arrays.copyOf(base, base.length + 1);
    held[base.length] = node("later", "NoOp", "^id");
    assertThat(UnchainedOps.mergedAsWritten(graph(held))).isEmpty();
    assertThat(UnchainedOps.merges(graph(held))).containsExactly(Map.entry("db", "dw"));
    // different control inputs
    NodeDef[] gated = base.clone();
    gated[5] = node("db", "BiasAddGrad", "dy", "^sizes");
    assertThat(UnchainedOps.mergedAsWritten(graph(gated))).isEmpty();
    // the same control inputs on both
    NodeDef[] both = gated.clone();
    both[4] = node("dw", "Conv2DBackpropFilter", "x", "sizes", "id", "^sizes");
    assertThat(UnchainedOps.mergedAsWritten(graph(both))).containsExactly(Map.entry("db", "dw"));
  }
}
