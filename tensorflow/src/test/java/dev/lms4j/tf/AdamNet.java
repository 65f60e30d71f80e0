package dev.lms4j.tf;

import java.util.List;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.framework.optimizers.Adam;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.TruncatedNormal;
import org.tensorflow.types.TFloat32;

/**
 * A CNN built the way a TF Java user builds one: {@code Ops}, variables initialised in the init
 * scope, and {@code org.tensorflow.framework.optimizers.Adam(graph, lr).minimize(loss, name)}.
 * Variable names hold no '/' (the framework's Adam names its slots {@code VARNAME-m}, which
 * {@code Ops.withName} refuses when the name has a '/').
 *
 * <p>Layout on {@code [batch, image, image, 3]}: conv3x3(width)+ReLU, conv3x3(width)+ReLU,
 * 2x2 max pool, conv3x3(2 width)+ReLU, flatten, dense({@code dense})+ReLU, dense(10).
 */
final class AdamNet {
  private AdamNet() {}

  /** The training graph (init op {@code Init}, the framework's own initialiser NoOp). */
  static TrainingGraph build(int batch, int image, int width, int dense) {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, image, image, 3)));
      Placeholder<TFloat32> y = tf.withName("labels").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, 10)));
      long[] seed = {0};
      Op[] prev = {null};
      Operand<TFloat32> h = conv(tf, "conv1", x, 3, width, seed, prev);
      h = conv(tf, "conv2", h, width, width, seed, prev);
      h = tf.nn.maxPool(h, tf.constant(new int[] {1, 2, 2, 1}), tf.constant(new int[] {1, 2, 2,
          1}), "VALID");
      h = conv(tf, "conv3", h, width, 2 * width, seed, prev);
      long flat = (long) (image / 2) * (image / 2) * 2 * width;
      h = tf.reshape(h, tf.constant(new long[] {batch, flat}));
      h = tf.nn.relu(tf.linalg.matMul(h, weight(tf, "dense1_kernel", Shape.of(flat, dense),
          flat, seed, prev)));
      Operand<TFloat32> logits = tf.linalg.matMul(h, weight(tf, "logits_kernel",
          Shape.of(dense, 10), dense * 100L, seed, prev));
      Operand<TFloat32> loss = tf.withName("loss").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(logits, y).loss(), tf.constant(0));
      new Adam(g, 1e-3f).minimize(loss, "train_op");
      Manifest m = new Manifest(List.of(
          new Manifest.Feed("x", "float32", new long[] {batch, image, image, 3}, "normal"),
          new Manifest.Feed("labels", "float32", new long[] {batch, 10}, "onehot")),
          "loss:0", "train_op", "Init");
      return new TrainingGraph(g.toGraphDef(), m);
    }
  }

  /**
   * An MLP trained with the framework's Adam: {@code layers} dense({@code width})+ReLU layers on
   * {@code [batch, width]} inputs, then dense(10). Its weight gradients ({@code width^2} floats
   * each) are what the framework's control edges keep alive until the end of the backward pass.
   */
  static TrainingGraph mlp(int batch, int width, int layers) {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, width)));
      Placeholder<TFloat32> y = tf.withName("labels").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, 10)));
      long[] seed = {0};
      Op[] prev = {null};
      Operand<TFloat32> h = x;
      for (int i = 0; i < layers; i++) {
        h = tf.nn.relu(tf.linalg.matMul(h, weight(tf, "dense" + i + "_kernel",
            Shape.of(width, width), width, seed, prev)));
      }
      Operand<TFloat32> logits = tf.linalg.matMul(h, weight(tf, "logits_kernel",
          Shape.of(width, 10), width * 100L, seed, prev));
      Operand<TFloat32> loss = tf.withName("loss").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(logits, y).loss(), tf.constant(0));
      new Adam(g, 1e-3f).minimize(loss, "train_op");
      Manifest m = new Manifest(List.of(
          new Manifest.Feed("x", "float32", new long[] {batch, width}, "normal"),
          new Manifest.Feed("labels", "float32", new long[] {batch, 10}, "onehot")),
          "loss:0", "train_op", "Init");
      return new TrainingGraph(g.toGraphDef(), m);
    }
  }

  private static Operand<TFloat32> conv(Ops tf, String name, Operand<TFloat32> in, long cin,
      long cout, long[] seed, Op[] prev) {
    Variable<TFloat32> k = weight(tf, name + "_kernel", Shape.of(3, 3, cin, cout), 9 * cin, seed, prev);
    return tf.nn.relu(tf.nn.conv2d(in, k, List.of(1L, 1L, 1L, 1L), "SAME"));
  }

  /**
   * A variable initialised (in the init scope) from a seeded truncated normal, He scale. Each
   * initialiser waits for the previous one ({@code prev[0]}): the framework's {@code Init} NoOp
   * would otherwise run every random initialiser at once, and on the MLP that needed more memory
   * than a training step (OOM at 150 MiB in {@code TruncatedNormal} for a step that peaks at
   * 136 MiB).
   */
  private static Variable<TFloat32> weight(Ops tf, String name, Shape shape, long fanIn,
      long[] seed, Op[] prev) {
    Ops init = tf.withInitScope();
    // the variable itself must not carry the edge: a step reading it would run the previous
    // initialiser again
    Variable<TFloat32> v = init.withName(name).variable(shape, TFloat32.class);
    Ops chained = prev[0] == null ? init : init.withControlDependencies(List.of(prev[0]));
    seed[0]++;
    Operand<TFloat32> unit = chained.random.truncatedNormal(chained.constant(shape.asArray()),
        TFloat32.class, TruncatedNormal.seed(7L), TruncatedNormal.seed2(seed[0]));
    prev[0] = chained.assign(v, chained.math.mul(unit,
        chained.constant((float) Math.sqrt(2.0 / fanIn))));
    return v;
  }
}
