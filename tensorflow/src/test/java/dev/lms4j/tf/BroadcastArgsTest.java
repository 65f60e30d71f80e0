package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.BroadcastGradientArgs;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;

/** {@link BroadcastArgs} against TensorFlow's own kernel, and the importer's use of it. */
class BroadcastArgsTest {
  @Test
  void theLengthsAreThoseTensorFlowsKernelGives() {
    List<long[][]> pairs = List.of(
        new long[][] {{2048, 512}, {}},
        new long[][] {{}, {2048, 512}},
        new long[][] {{2048, 512}, {512}},
        new long[][] {{2048, 512}, {2048, 512}},
        new long[][] {{8, 1, 5}, {1, 7, 5}},
        new long[][] {{1, 1}, {1}},
        new long[][] {{4, 1, 3, 1}, {3, 6}},
        new long[][] {{1}, {}});
    try (Graph g = new Graph(); Session s = new Session(g)) {
      Ops tf = Ops.create(g);
      for (long[][] p : pairs) {
        BroadcastGradientArgs<TInt32> args = tf.broadcastGradientArgs(
            tf.constant(ints(p[0])), tf.constant(ints(p[1])));
        try (var r = s.runner().fetch(args.r0()).fetch(args.r1()).run()) {
          long[] expected = {r.get(0).shape().size(0), r.get(1).shape().size(0)};
          assertThat(BroadcastArgs.lengths(p[0], p[1]))
              .as("%s and %s", java.util.Arrays.toString(p[0]), java.util.Arrays.toString(p[1]))
              .containsExactly(expected);
        }
      }
    }
    assertThat(BroadcastArgs.lengths(new long[] {3, 4}, new long[] {5, 4})).isNull();
  }

  @Test
  void theImporterSizesTheOutputsByTheOperandsShapesNotTheBatch() {
    // x * w with a scalar weight: the gradient's BroadcastGradientArgs sums w's over both axes
    // and x's over none; TensorFlow infers [?] for both outputs
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(2048, 512)));
      Variable<TFloat32> w = tf.withName("w").variable(Shape.scalar(), TFloat32.class);
      Operand<TFloat32> loss = tf.withName("loss").reduceSum(tf.math.mul(x, w),
          tf.constant(new int[] {0, 1}));
      g.addGradients("gradients", new Output<?>[] {loss.asOutput()},
          new Output<?>[] {w.asOutput()}, null);
      DataflowGraph m = GraphImporter.importGraph(g.toGraphDef(),
          Map.of("x", new long[] {2048, 512}), -1, "gradients");
      List<Op> args = m.ops().stream()
          .filter(o -> o.type().equals("BroadcastGradientArgs")).toList();
      assertThat(args).hasSize(1);
      assertThat(args.get(0).outputs().get(0).bytes()).isZero();
      assertThat(args.get(0).outputs().get(1).bytes()).isEqualTo(2 * 4);
      assertThat(args.get(0).outputs().get(1).shape()).containsExactly(2);
    }
  }

  private static int[] ints(long[] s) {
    return java.util.Arrays.stream(s).mapToInt(v -> (int) v).toArray();
  }
}
