package dev.lms4j.tf;

import java.util.ArrayList;
import java.util.List;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.types.TFloat32;

/** A small fully-connected training graph for adapter tests (the zoo lives in train/). */
final class TinyNet {
  private TinyNet() {}

  /** {@code layers} ReLU layers of {@code width} units on {@code [batch, 32]} inputs, 10 classes. */
  static TrainingGraph build(int batch, int width, int layers) {
    return build(batch, width, layers, "gradients");
  }

  /** The same net with its gradient ops under {@code gradientScope} instead of gradients/. */
  static TrainingGraph build(int batch, int width, int layers, String gradientScope) {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, 32)));
      Placeholder<TFloat32> y = tf.withName("labels").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, 10)));
      List<Variable<TFloat32>> vars = new ArrayList<>();
      List<Op> inits = new ArrayList<>();
      Operand<TFloat32> h = x;
      long in = 32;
      for (int i = 0; i <= layers; i++) {
        long out = i == layers ? 10 : width;
        Variable<TFloat32> w = tf.withName("w" + i).variable(Shape.of(in, out), TFloat32.class);
        Operand<TFloat32> u = tf.random.randomUniform(tf.constant(new long[] {in, out}),
            TFloat32.class, RandomUniform.seed(7L), RandomUniform.seed2((long) i + 1));
        inits.add(tf.assign(w, tf.math.mul(tf.math.sub(u, tf.constant(0.5f)),
            tf.constant((float) (2.0 / Math.sqrt(in))))));
        vars.add(w);
        h = tf.withName("layer" + i).linalg.matMul(h, w);
        if (i < layers) {
          h = tf.withName("relu" + i).nn.relu(h);
        }
        in = out;
      }
      Operand<TFloat32> loss = tf.withName("loss").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(h, y).loss(), tf.constant(0));
      Output<?>[] grads = g.addGradients(gradientScope, new Output<?>[] {loss.asOutput()},
          vars.stream().map(Variable::asOutput).toArray(Output<?>[]::new), null);
      List<Op> updates = new ArrayList<>();
      for (int i = 0; i < vars.size(); i++) {
        updates.add(tf.train.applyGradientDescent(vars.get(i), tf.constant(0.05f),
            grads[i].expect(TFloat32.class)));
      }
      tf.withControlDependencies(updates).withName("train_op").noOp();
      tf.withControlDependencies(inits).withName("init").noOp();
      Manifest m = new Manifest(List.of(
          new Manifest.Feed("x", "float32", new long[] {batch, 32}, "normal"),
          new Manifest.Feed("labels", "float32", new long[] {batch, 10}, "onehot")),
          "loss", "train_op", "init");
      return new TrainingGraph(g.toGraphDef(), m);
    }
  }
}
