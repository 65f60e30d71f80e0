package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;

/**
 * Dense gradient-descent updates of a gathered table become sparse updates of the rows looked
 * up, with the table bit-identical after several steps (many repeated ids, so rows sum several
 * gradients).
 */
class SparseUpdatesTest {
  private static final int BATCH = 64;

  @Test
  void aRefTableIsUpdatedOnlyWhereLookedUpAndEndsBitIdentical() {
    GraphDef gd = table(50, 6, false, false);
    SparseUpdates.Result r = SparseUpdates.rewrite(gd, Map.of());
    assertThat(r.updates()).containsExactly("table_update");
    assertThat(r.bytes()).isEqualTo(50L * 6 * 4);
    Map<String, NodeDef> nodes = TfTests.nodes(r.graphDef());
    assertThat(nodes.get("table_update").getOp()).isEqualTo("ScatterSub");
    // the dense sum is no longer what a step runs
    assertThat(GraphImporter.ancestors(r.graphDef(), Set.of("train_op")))
        .noneMatch(n -> nodes.get(n).getOp().equals("UnsortedSegmentSum")
            && !n.startsWith(SparseUpdates.PREFIX));
    List<Integer> trained = train(gd, 4);
    assertThat(trained).as("the steps move the table").isNotEqualTo(train(gd, 0));
    assertThat(train(r.graphDef(), 4)).isEqualTo(trained);
  }

  @Test
  void aResourceTableToo() {
    GraphDef gd = table(50, 6, true, false);
    SparseUpdates.Result r = SparseUpdates.rewrite(gd, Map.of());
    assertThat(r.updates()).containsExactly("table_update");
    assertThat(TfTests.nodes(r.graphDef()).get("table_update").getOp())
        .isEqualTo("ResourceScatterSub");
    assertThat(train(r.graphDef(), 4)).isEqualTo(train(gd, 4));
  }

  /** A square table: a transpose of its sum might swap the axes, so it is left alone. */
  @Test
  void aSquareTableIsLeftAlone() {
    GraphDef gd = table(6, 6, false, false);
    SparseUpdates.Result r = SparseUpdates.rewrite(gd, Map.of());
    assertThat(r.changed()).isFalse();
    assertThat(r.graphDef()).isSameAs(gd);
  }

  /** When something else reads the dense gradient, it is computed anyway: left alone. */
  @Test
  void aDenseGradientWithAnotherReaderIsLeftAlone() {
    GraphDef gd = table(50, 6, false, true);
    assertThat(SparseUpdates.rewrite(gd, Map.of()).changed()).isFalse();
  }

  @Test
  void aGraphWithoutGatherUpdatesIsLeftAlone() {
    GraphDef gd = TinyNet.build(8, 16, 1).graphDef();
    assertThat(SparseUpdates.rewrite(gd, Map.of()).graphDef()).isSameAs(gd);
  }

  /**
   * ids [BATCH] in [0, 7) look up a {@code rows x dim} table; the rows feed a dense layer and a
   * softmax loss; the table and the layer take gradient descent at 0.5. {@code tap} also sums
   * the table's dense gradient into a second fetch.
   */
  private static GraphDef table(int rows, int dim, boolean resource, boolean tap) {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TInt32> ids = tf.withName("ids").placeholder(TInt32.class,
          Placeholder.shape(Shape.of(BATCH)));
      Placeholder<TFloat32> y = tf.withName("labels").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(BATCH, 3)));
      Operand<TFloat32> init = tf.random.randomUniform(tf.constant(new long[] {rows, dim}),
          TFloat32.class, RandomUniform.seed(3L), RandomUniform.seed2(4L));
      Operand<TFloat32> winit = tf.random.randomUniform(tf.constant(new long[] {dim, 3}),
          TFloat32.class, RandomUniform.seed(3L), RandomUniform.seed2(5L));
      List<Op> inits = new ArrayList<>();
      Output<?> tableValue;
      Output<?> tableHandle;
      Operand<TFloat32> looked;
      Variable<TFloat32> w = tf.withName("w").variable(Shape.of(dim, 3), TFloat32.class);
      inits.add(tf.assign(w, winit));
      if (resource) {
        var h = tf.withName("table").varHandleOp(TFloat32.class, Shape.of(rows, dim));
        inits.add(tf.withName("table_assign").assignVariableOp(h, init));
        Operand<TFloat32> read = tf.withName("table_read").readVariableOp(h, TFloat32.class);
        looked = tf.withName("lookup").gather(read, ids, tf.constant(0));
        tableValue = read.asOutput();
        tableHandle = h.asOutput();
      } else {
        Variable<TFloat32> t = tf.withName("table").variable(Shape.of(rows, dim),
            TFloat32.class);
        inits.add(tf.withName("table_assign").assign(t, init));
        looked = tf.withName("lookup").gather(t, ids, tf.constant(0));
        tableValue = t.asOutput();
        tableHandle = t.asOutput();
      }
      Operand<TFloat32> logits = tf.linalg.matMul(tf.math.tanh(looked), w);
      Operand<TFloat32> loss = tf.withName("loss").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(logits, y).loss(), tf.constant(0));
      Output<?>[] grads = g.addGradients("gradients", new Output<?>[] {loss.asOutput()},
          new Output<?>[] {tableValue, w.asOutput()}, null);
      Operand<TFloat32> lr = tf.constant(0.5f);
      List<Op> updates = new ArrayList<>();
      if (resource) {
        updates.add(tf.withName("table_update").train.resourceApplyGradientDescent(
            tableHandle, lr, grads[0].expect(TFloat32.class)));
      } else {
        @SuppressWarnings("unchecked")
        Operand<TFloat32> t = (Operand<TFloat32>) tableHandle;
        updates.add(tf.withName("table_update").train.applyGradientDescent(t, lr,
            grads[0].expect(TFloat32.class)));
      }
      updates.add(tf.train.applyGradientDescent(w, lr, grads[1].expect(TFloat32.class)));
      if (tap) {
        tf.withName("grad_norm").reduceSum(grads[0].expect(TFloat32.class), tf.constant(0));
      }
      tf.withControlDependencies(updates).withName("train_op").noOp();
      tf.withControlDependencies(inits).withName("init").noOp();
      if (resource) {
        tf.withName("table_value").readVariableOp(tableHandle, TFloat32.class);
      } else {
        tf.withName("table_value").identity(tableValue.expect(TFloat32.class));
      }
      return g.toGraphDef();
    }
  }

  /** The table's bits after {@code steps} steps on fixed ids (many repeated) and labels. */
  private static List<Integer> train(GraphDef gd, int steps) {
    SplittableRandom rnd = new SplittableRandom(11);
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      try (Session s = new Session(g, SessionConfigs.lms())) {
        s.runner().addTarget("init").run();
        for (int step = 0; step < steps; step++) {
          int[] idv = new int[BATCH];
          float[] lab = new float[BATCH * 3];
          for (int i = 0; i < BATCH; i++) {
            idv[i] = rnd.nextInt(7);
            lab[i * 3 + rnd.nextInt(3)] = 1;
          }
          try (TInt32 idt = TInt32.vectorOf(idv);
              TFloat32 lt = TFloat32.tensorOf(Shape.of(BATCH, 3),
                  org.tensorflow.ndarray.buffer.DataBuffers.of(lab))) {
            s.runner().feed("ids", idt).feed("labels", lt).addTarget("train_op").run();
          }
        }
        try (Result res = s.runner().fetch("table_value").run()) {
          TFloat32 t = (TFloat32) res.get(0);
          List<Integer> bits = new ArrayList<>();
          t.scalars().forEach(x -> bits.add(Float.floatToRawIntBits(x.getFloat())));
          return bits;
        }
      }
    }
  }
}
