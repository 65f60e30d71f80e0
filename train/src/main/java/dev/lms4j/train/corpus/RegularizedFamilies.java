package dev.lms4j.train.corpus;

import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.framework.optimizers.Adam;
import org.tensorflow.framework.optimizers.Optimizer.GradAndVar;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.types.TFloat32;

/**
 * Families with the regularisers users add to a training graph: dropout in the step (a random op
 * the backward pass depends on) and gradient clipping by global norm (an update that waits for
 * every gradient).
 */
final class RegularizedFamilies {
  private RegularizedFamilies() {}

  /**
   * An MLP classifier with dropout after every hidden layer and gradients clipped by global norm,
   * trained with the framework's Adam through {@code computeGradients} / {@code applyGradients},
   * the way a user clips in TF Java.
   */
  static TrainingGraph mlpDropout(boolean small, long seed) {
    return small ? mlpDropout(512, 64, 256, 4, seed) : mlpDropout(2048, 784, 512, 6, seed);
  }

  /**
   * The MLP at a given batch, input width, hidden width and number of hidden layers.
   *
   * <p>Dropout is written as {@code tf.nn.dropout} writes it: {@code x * (1 / keep) *
   * cast(uniform >= rate)}, the uniform draw seeded per layer ({@code RandomUniform} with seed
   * and seed2, so two sessions draw the same masks; a clone would draw different ones). Clipping
   * is {@code tf.clip_by_global_norm}: {@code g * clip / max(sqrt(2 * sum(l2_loss(g))), clip)}.
   */
  static TrainingGraph mlpDropout(int batch, int in, int width, int layers, long seed) {
    float rate = 0.1f;
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, in), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      Operand<TFloat32> h = x;
      long w = in;
      for (int l = 0; l < layers; l++) {
        h = tf.nn.relu(n.dense(h, "fc" + l, w, width));
        Ops d = tf.withSubScope("dropout" + l);
        Operand<TFloat32> u = d.random.randomUniform(d.constant(new long[] {batch, width}),
            TFloat32.class, RandomUniform.seed(seed), RandomUniform.seed2(200L + l));
        Operand<TFloat32> keep = d.dtypes.cast(d.math.greaterEqual(u, d.constant(rate)),
            TFloat32.class);
        h = d.math.mul(d.math.mul(h, d.constant(1f / (1f - rate))), keep);
        w = width;
      }
      Operand<TFloat32> loss = n.softmaxLoss(n.dense(h, "out", w, 10), labels);

      Adam adam = new Adam(n.graph, 0.001f);
      List<GradAndVar<?>> grads = adam.computeGradients(loss);
      Ops c = tf.withSubScope("clip");
      List<Operand<TFloat32>> squares = new ArrayList<>();
      for (GradAndVar<?> gv : grads) {
        squares.add(c.nn.l2Loss(gv.getGradient().expect(TFloat32.class)));
      }
      Operand<TFloat32> norm = c.withName("global_norm").math.sqrt(
          c.math.mul(c.math.addN(squares), c.constant(2f)));
      Operand<TFloat32> clipNorm = c.constant(1f);
      Operand<TFloat32> scale = c.math.div(clipNorm, c.math.maximum(norm, clipNorm));
      List<GradAndVar<?>> clipped = new ArrayList<>();
      for (GradAndVar<?> gv : grads) {
        Output<TFloat32> g = c.math.mul(gv.getGradient().expect(TFloat32.class), scale)
            .asOutput();
        clipped.add(new GradAndVar<>(g, gv.getVariable().expect(TFloat32.class)));
      }
      adam.applyGradients(clipped, "train_op");
      return n.finishInitOnly();
    }
  }
}
