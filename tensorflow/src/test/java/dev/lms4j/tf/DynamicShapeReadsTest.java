package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.tf.run.StepLoop;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;

/**
 * The importer's {@link DataflowGraph#dynamicShapeReads()} against what grappler does: a shape
 * read of a tensor whose shape comes from a feed runs in the step as a {@code Shape} kernel, one
 * of a convolution of the feed reshaped to a constant shape is folded into a {@code Const},
 * though both tensors lead back to the feed.
 */
class DynamicShapeReadsTest {
  @Test
  void theReadsGrapplerLeavesToTheStepAreTheOnesNamed() {
    TrainingGraph tg = graph();
    DataflowGraph g = GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(), -1,
        "gradients", tg.manifest().runOps());
    assertThat(g.dynamicShapeReads()).contains("fed_shape").doesNotContain("fixed_shape");
    boolean[] dynamic = g.shapeDynamic();
    assertThat(dynamic[g.opOrThrow("fed_size").id()]).isTrue();
    assertThat(dynamic[g.opOrThrow("fixed_size").id()]).isFalse();

    // TensorFlow: the kernel each ran as in a traced step (grappler may rewrite the product of
    // a shape into a Size of the tensor)
    Map<String, String> ranAs = new HashMap<>();
    StepLoop.run(tg.graphDef(), tg.manifest(), SessionConfigs.lms(), 1, 1, r -> { })
        .stats().nodes().forEach(n -> ranAs.put(n.name(), n.type()));
    assertThat(ranAs.get("fed_shape")).isEqualTo("Shape");
    // folded: a constant, or gone into the constant its reader was folded to
    assertThat(ranAs.getOrDefault("fixed_shape", "folded")).isIn("Const", "folded");
    assertThat(ranAs.getOrDefault("fixed_size", "folded")).isIn("Const", "folded");
    assertThat(ranAs.get("fed_size")).isIn("Prod", "Size");
  }

  /**
   * x [8, 16] fed; h = x w; the shape of h (fed_shape) and of a convolution of x reshaped to
   * [8, 4, 4, 1] (fixed_shape), each reduced to a size the loss reads.
   */
  private static TrainingGraph graph() {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(8, 16)));
      Variable<TFloat32> w = tf.withName("w").variable(Shape.of(16, 32), TFloat32.class);
      Variable<TFloat32> k = tf.withName("k").variable(Shape.of(3, 3, 1, 4), TFloat32.class);
      Operand<TFloat32> h = tf.withName("h").linalg.matMul(x, w);
      Operand<TFloat32> fixed = tf.withName("fixed").nn.conv2d(
          tf.reshape(x, tf.constant(new int[] {8, 4, 4, 1})), k, List.of(1L, 1L, 1L, 1L),
          "SAME");
      Operand<TInt32> fedSize = tf.withName("fed_size").reduceProd(
          tf.withName("fed_shape").shape(h), tf.constant(0));
      Operand<TInt32> fixedSize = tf.withName("fixed_size").reduceProd(
          tf.withName("fixed_shape").shape(fixed), tf.constant(0));
      Operand<TFloat32> loss = tf.withName("loss").math.add(
          tf.math.add(tf.reduceSum(h, tf.constant(new int[] {0, 1})),
              tf.reduceSum(fixed, tf.constant(new int[] {0, 1, 2, 3}))),
          tf.dtypes.cast(tf.math.add(fedSize, fixedSize), TFloat32.class));
      List<org.tensorflow.op.Op> inits = List.of(
          tf.assign(w, tf.fill(tf.constant(new int[] {16, 32}), tf.constant(0.01f))),
          tf.assign(k, tf.fill(tf.constant(new int[] {3, 3, 1, 4}), tf.constant(0.01f))));
      tf.withControlDependencies(List.of(loss)).withName("train_op").noOp();
      tf.withControlDependencies(inits).withName("init").noOp();
      Manifest m = new Manifest(List.of(
          new Manifest.Feed("x", "float32", new long[] {8, 16}, "normal")),
          "loss", "train_op", "init");
      return new TrainingGraph(g.toGraphDef(), m);
    }
  }
}
