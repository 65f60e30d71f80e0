package dev.lms4j.train.corpus;

import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.framework.optimizers.Adam;
import org.tensorflow.framework.optimizers.Optimizer.GradAndVar;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.nn.FusedBatchNorm;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.types.TFloat16;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt64;

/**
 * Families with the regularisers and bookkeeping users add to a training graph: dropout in the
 * step (a random op the backward pass depends on), gradient clipping by global norm (an update
 * that waits for every gradient), and a whole training recipe of state updated in the step
 * (batch-norm moving statistics, a global step, a moving average of the weights).
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

  /**
   * A ResNet-style CNN trained with the recipe of TensorFlow's own image models: batch norm in
   * training mode whose moving mean and variance are updated in the step ({@code AssignSub} on
   * non-trainable variables from the batch statistics, the {@code UPDATE_OPS} the train op waits
   * for), L2 weight decay on every kernel added to the loss, a learning rate decayed from a
   * global step ({@code lr = 0.05 * 0.96^(step / 100)}), momentum updates at that rate, then the
   * global step incremented ({@code AssignAdd}) and an exponential moving average of every weight
   * (decay 0.99, shadow variables) updated after the weights, as {@code optimizer.minimize(...,
   * global_step)} and {@code ExponentialMovingAverage.apply} under the optimizer's control
   * dependencies build it. Stateful ops in the forward pass and after the updates: none may run
   * twice or move before what it reads.
   */
  static TrainingGraph cnnRecipe(boolean small, long seed) {
    int batch = small ? 4 : 16;
    int side = small ? 16 : 32;
    int width = small ? 8 : 32;
    int blocks = small ? 2 : 4;
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, side, side, 3), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      List<Op> stateUpdates = new ArrayList<>();
      List<Operand<TFloat32>> kernels = new ArrayList<>();
      Operand<TFloat32> h = tf.nn.relu(recipeBatchNorm(n, "stem_bn",
          recipeConv(n, "stem", x, 3, width, kernels), width, stateUpdates));
      for (int b = 0; b < blocks; b++) {
        String p = "block" + b;
        Operand<TFloat32> r = tf.nn.relu(recipeBatchNorm(n, p + "_bn1",
            recipeConv(n, p + "_conv1", h, width, width, kernels), width, stateUpdates));
        r = recipeBatchNorm(n, p + "_bn2", recipeConv(n, p + "_conv2", r, width, width, kernels),
            width, stateUpdates);
        h = tf.nn.relu(tf.math.add(h, r));
      }
      Operand<TFloat32> pooled = tf.math.mean(h, tf.constant(new int[] {1, 2}));
      Operand<TFloat32> logits = n.dense(pooled, "logits", width, 10);
      Operand<TFloat32> xent = tf.withName("xent").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(logits, labels).loss(), tf.constant(new int[] {0}));
      // the kernels' L2 losses summed pairwise, not by one AddN: TensorFlow's C++ gradient
      // builder takes an op's inputs in the order of its edge set, which above four inputs is
      // ordered by the edges' addresses, so the gradient ops of a 9-input AddN were named in
      // another order in every process (the family's graph was not reproducible)
      Ops wd = tf.withSubScope("weight_decay");
      Operand<TFloat32> l2 = null;
      for (Operand<TFloat32> k : kernels) {
        Operand<TFloat32> term = wd.nn.l2Loss(k);
        l2 = l2 == null ? term : wd.math.add(l2, term);
      }
      Operand<TFloat32> loss = tf.withName("loss").math.add(xent,
          wd.math.mul(l2, wd.constant(1e-4f)));

      Ops sched = tf.withSubScope("schedule");
      Variable<TInt64> step = sched.withName("global_step").variable(Shape.scalar(),
          TInt64.class);
      n.initOp(sched.withName("global_step_assign").assign(step, sched.constant(0L)));
      Operand<TFloat32> rate = sched.withName("learning_rate").math.mul(sched.constant(0.05f),
          sched.math.pow(sched.constant(0.96f), sched.math.div(
              sched.dtypes.cast(step, TFloat32.class), sched.constant(100f))));

      List<Operand<?>> values = new ArrayList<>();
      for (Net.Param p : n.params()) {
        values.add(p.value());
      }
      List<Net.Param> trained = new ArrayList<>(n.params());
      List<Op> updates = n.updates(trained, n.gradients(loss, values), 0, Net.Update.MOMENTUM,
          rate);
      Ops after = tf.withControlDependencies(updates);
      List<Op> last = new ArrayList<>(stateUpdates);
      last.add(after.withSubScope("schedule").withName("increment").assignAdd(step, after.constant(1L)));
      // the shadows and their initialisers outside the updates' control dependencies (init
      // must not run a step), their updates inside them
      Ops shadows = tf.withSubScope("ema");
      Ops ema = after.withSubScope("ema");
      for (Net.Param p : trained) {
        @SuppressWarnings("unchecked")
        Variable<TFloat32> v = (Variable<TFloat32>) p.handle();
        Variable<TFloat32> shadow = shadows.withName(p.name() + "_shadow").variable(p.shape(),
            TFloat32.class);
        n.initOp(shadows.withName(p.name() + "_shadow_assign").assign(shadow, shadows.fill(
            shadows.constant(p.shape().asArray()), shadows.constant(0f))));
        last.add(ema.withName(p.name() + "_shadow_update").assignSub(shadow,
            ema.math.mul(ema.math.sub(shadow, v), ema.constant(0.01f))));
      }
      return n.finish(last);
    }
  }

  /** A 3x3 convolution without bias (batch norm follows); its kernel joins {@code kernels}. */
  private static Operand<TFloat32> recipeConv(Net n, String name, Operand<TFloat32> in, int cin,
      int cout, List<Operand<TFloat32>> kernels) {
    Net.Param w = n.he(name + "_w", Shape.of(3, 3, cin, cout), 9L * cin);
    kernels.add(w.value());
    return n.tf.nn.conv2d(in, w.value(), List.of(1L, 1L, 1L, 1L), "SAME");
  }

  /**
   * {@code FusedBatchNormV3} in training mode, and the updates of its moving mean and variance
   * ({@code moving -= (moving - batch) * 0.01}) added to {@code stateUpdates}.
   */
  private static Operand<TFloat32> recipeBatchNorm(Net n, String name, Operand<TFloat32> in,
      int c, List<Op> stateUpdates) {
    Ops tf = n.tf;
    Net.Param scale = n.filled(name + "_scale", Shape.of(c), 1f);
    Net.Param offset = n.filled(name + "_offset", Shape.of(c), 0f);
    Operand<TFloat32> empty = tf.constant(new float[0]);
    FusedBatchNorm<TFloat32, TFloat32> bn = tf.nn.fusedBatchNorm(in, scale.value(),
        offset.value(), empty, empty, FusedBatchNorm.isTraining(true));
    Ops m = tf.withSubScope(name + "_moving");
    Operand<TFloat32>[] batchStats = List.of(bn.batchMean(), bn.batchVariance())
        .toArray(new Operand[0]);
    String[] kind = {"mean", "variance"};
    for (int i = 0; i < 2; i++) {
      Variable<TFloat32> moving = m.withName(kind[i]).variable(Shape.of(c), TFloat32.class);
      n.initOp(m.withName(kind[i] + "_assign").assign(moving, m.fill(m.constant(new long[] {c}),
          m.constant(i == 0 ? 0f : 1f))));
      stateUpdates.add(m.withName(kind[i] + "_update").assignSub(moving,
          m.math.mul(m.math.sub(moving, batchStats[i]), m.constant(0.01f))));
    }
    return bn.y();
  }

  /**
   * An MLP trained in mixed precision, as users save memory before they reach for LMS: float32
   * master weights, each cast to float16 ({@code Cast}) for its layer, every activation and its
   * gradient in float16 ({@code MatMul}, {@code BiasAdd}, {@code Relu} on halves), the logits
   * cast back to float32 for the softmax cross entropy, a static loss scale (the loss times 128
   * differentiated, each gradient divided by 128 in float32 before its momentum update). The
   * half copies of the weights are read again in the backward pass: tensors of 2 bytes an
   * element made from variables, alive from the forward pass to the backward one.
   */
  static TrainingGraph mlpMixed(boolean small, long seed) {
    return small ? mlpMixed(256, 64, 128, 3, seed) : mlpMixed(4096, 512, 1024, 5, seed);
  }

  /** The mixed-precision MLP at a given batch, input width, hidden width and depth. */
  static TrainingGraph mlpMixed(int batch, int in, int width, int layers, long seed) {
    float scale = 128f;
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, in), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      Operand<TFloat16> h = tf.dtypes.cast(x, TFloat16.class);
      long w = in;
      for (int l = 0; l <= layers; l++) {
        long out = l == layers ? 10 : width;
        Net.Param wt = n.he("fc" + l + "_w", Shape.of(w, out), w);
        Net.Param b = n.filled("fc" + l + "_b", Shape.of(out), 0f);
        Ops half = tf.withSubScope("fc" + l + "_half");
        Operand<TFloat16> y = tf.nn.biasAdd(tf.linalg.matMul(h,
            half.dtypes.cast(wt.value(), TFloat16.class)),
            half.dtypes.cast(b.value(), TFloat16.class));
        h = l == layers ? y : tf.nn.relu(y);
        w = out;
      }
      Operand<TFloat32> logits = tf.dtypes.cast(h, TFloat32.class);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      Ops ls = tf.withSubScope("loss_scale");
      Operand<TFloat32> scaled = ls.withName("scaled").math.mul(loss, ls.constant(scale));
      List<Operand<?>> values = new ArrayList<>();
      for (Net.Param p : n.params()) {
        values.add(p.value());
      }
      org.tensorflow.Output<?>[] grads = n.gradients(scaled, values);
      for (int i = 0; i < grads.length; i++) {
        grads[i] = ls.math.div(grads[i].expect(TFloat32.class), ls.constant(scale)).asOutput();
      }
      return n.finish(n.updates(n.params(), grads, 0, Net.Update.MOMENTUM, 0.01f));
    }
  }
}
