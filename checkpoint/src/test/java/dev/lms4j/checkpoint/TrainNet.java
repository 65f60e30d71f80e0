package dev.lms4j.checkpoint;

import java.util.ArrayList;
import java.util.List;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt64;

/**
 * A two-layer regression net trained with momentum: variables {@code w0}, {@code w1}, their
 * accumulators {@code momentum_w0}, {@code momentum_w1} and a {@code global_step}. Ops
 * {@code init}, {@code train} (one step) and tensor {@code loss}.
 */
final class TrainNet {
  private TrainNet() {}

  static final List<String> WEIGHTS = List.of("w0", "w1");

  static Graph build() {
    Graph g = new Graph();
    Ops tf = Ops.create(g);
    // constants: a seeded random op would draw new data at every step
    Operand<TFloat32> x = tf.constant(Shape.of(32, 8), data(32 * 8, 1));
    Operand<TFloat32> y = tf.constant(Shape.of(32, 4), data(32 * 4, 2));
    Variable<TFloat32> w0 = tf.withName("w0").variable(Shape.of(8, 16), TFloat32.class);
    Variable<TFloat32> w1 = tf.withName("w1").variable(Shape.of(16, 4), TFloat32.class);
    Variable<TFloat32> m0 = tf.withName("momentum_w0")
        .variable(Shape.of(8, 16), TFloat32.class);
    Variable<TFloat32> m1 = tf.withName("momentum_w1")
        .variable(Shape.of(16, 4), TFloat32.class);
    Variable<TInt64> step = tf.withName("global_step").variable(Shape.scalar(), TInt64.class);
    List<Op> inits = new ArrayList<>();
    inits.add(tf.assign(w0, tf.math.mul(tf.math.sub(tf.random.randomUniform(
        tf.constant(new long[] {8, 16}), TFloat32.class, RandomUniform.seed(5L),
        RandomUniform.seed2(6L)), tf.constant(0.5f)), tf.constant(0.5f))));
    inits.add(tf.assign(w1, tf.math.mul(tf.math.sub(tf.random.randomUniform(
        tf.constant(new long[] {16, 4}), TFloat32.class, RandomUniform.seed(7L),
        RandomUniform.seed2(8L)), tf.constant(0.5f)), tf.constant(0.5f))));
    inits.add(tf.assign(m0, tf.zeros(tf.constant(new long[] {8, 16}), TFloat32.class)));
    inits.add(tf.assign(m1, tf.zeros(tf.constant(new long[] {16, 4}), TFloat32.class)));
    inits.add(tf.assign(step, tf.constant(0L)));
    tf.withControlDependencies(inits).withName("init").noOp();
    Operand<TFloat32> h = tf.nn.relu(tf.linalg.matMul(x, w0));
    Operand<TFloat32> d = tf.math.sub(tf.linalg.matMul(h, w1), y);
    Operand<TFloat32> loss = tf.withName("loss").math.mean(tf.math.square(d),
        tf.constant(new int[] {0, 1}));
    Output<?>[] grads = g.addGradients("gradients", new Output<?>[] {loss.asOutput()},
        new Output<?>[] {w0.asOutput(), w1.asOutput()}, null);
    List<Op> updates = new ArrayList<>();
    updates.add(tf.train.applyMomentum(w0, m0, tf.constant(0.02f),
        grads[0].expect(TFloat32.class), tf.constant(0.9f)));
    updates.add(tf.train.applyMomentum(w1, m1, tf.constant(0.02f),
        grads[1].expect(TFloat32.class), tf.constant(0.9f)));
    updates.add(tf.assignAdd(step, tf.constant(1L)));
    tf.withControlDependencies(updates).withName("train").noOp();
    return g;
  }

  private static org.tensorflow.ndarray.buffer.FloatDataBuffer data(int n, long seed) {
    java.util.Random r = new java.util.Random(seed);
    float[] f = new float[n];
    for (int i = 0; i < n; i++) {
      f[i] = r.nextFloat();
    }
    return org.tensorflow.ndarray.buffer.DataBuffers.of(f);
  }

  /** A session that runs ops in the caller's thread (deterministic order). */
  static Session session(Graph g) {
    return new Session(g, ConfigProto.newBuilder().setInterOpParallelismThreads(-1).build());
  }

  /** Runs {@code n} steps; returns each step's loss (before its update). */
  static float[] train(Session s, int n) {
    float[] out = new float[n];
    for (int i = 0; i < n; i++) {
      try (Result r = s.runner().fetch("loss").addTarget("train").run()) {
        out[i] = ((TFloat32) r.get(0)).getFloat();
      }
    }
    return out;
  }
}
