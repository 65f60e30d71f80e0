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

/**
 * A 2-layer MLP trained with momentum whose slots are zero-initialised by
 * {@code Fill(Const dims, Const 0)}, as Python's {@code tf.zeros} builds them: the graph
 * {@link InitConstants} is for. Layer 1 is {@code [in, width]}; its slot is that big too.
 */
final class SlotNet {
  private SlotNet() {}

  /**
   * The training graph: inputs {@code [batch, in]}, a ReLU layer of {@code width}, 10 classes;
   * weights uniform (seeded), momentum 0.9 with zero-filled slots; one step-side Fill too (a
   * {@code [batch, width]} bias of ones added to the hidden layer), which must stay as it is.
   */
  static TrainingGraph build(int batch, int in, int width) {
    return build(batch, in, width, false);
  }

  /**
   * The same graph; with {@code zerosLike} the slots are initialised by {@code ZerosLike} of
   * their weight's random initial value instead of a Fill (both folded by grappler).
   */
  static TrainingGraph build(int batch, int in, int width, boolean zerosLike) {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, in)));
      Placeholder<TFloat32> y = tf.withName("labels").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, 10)));
      List<Variable<TFloat32>> vars = new ArrayList<>();
      List<Variable<TFloat32>> slots = new ArrayList<>();
      List<Op> inits = new ArrayList<>();
      long[][] shapes = {{in, width}, {width, 10}};
      for (int i = 0; i < shapes.length; i++) {
        Shape s = Shape.of(shapes[i]);
        Variable<TFloat32> w = tf.withName("w" + i).variable(s, TFloat32.class);
        Ops wi = tf.withSubScope("w" + i + "_init");
        Operand<TFloat32> u = wi.random.randomUniform(wi.constant(shapes[i]), TFloat32.class,
            RandomUniform.seed(7L), RandomUniform.seed2((long) i + 1));
        inits.add(wi.assign(w, wi.math.mul(wi.math.sub(u, wi.constant(0.5f)),
            wi.constant((float) (2.0 / Math.sqrt(shapes[i][0]))))));
        Variable<TFloat32> m = tf.withName("w" + i + "_momentum").variable(s, TFloat32.class);
        Ops mi = tf.withSubScope("w" + i + "_momentum_init");
        inits.add(mi.assign(m, zerosLike ? mi.zerosLike(u)
            : mi.fill(mi.constant(shapes[i]), mi.constant(0f))));
        vars.add(w);
        slots.add(m);
      }
      Ops step = tf.withSubScope("step");
      Operand<TFloat32> ones = step.fill(step.constant(new int[] {batch, width}),
          step.constant(1f));
      Operand<TFloat32> h = tf.withName("relu").nn.relu(tf.math.add(
          tf.withName("layer0").linalg.matMul(x, vars.get(0)), ones));
      Operand<TFloat32> logits = tf.withName("layer1").linalg.matMul(h, vars.get(1));
      Operand<TFloat32> loss = tf.withName("loss").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(logits, y).loss(), tf.constant(0));
      Output<?>[] grads = g.addGradients("gradients", new Output<?>[] {loss.asOutput()},
          vars.stream().map(Variable::asOutput).toArray(Output<?>[]::new), null);
      List<Op> updates = new ArrayList<>();
      for (int i = 0; i < vars.size(); i++) {
        updates.add(tf.train.applyMomentum(vars.get(i), slots.get(i), tf.constant(0.01f),
            grads[i].expect(TFloat32.class), tf.constant(0.9f)));
      }
      tf.withControlDependencies(updates).withName("train_op").noOp();
      tf.withControlDependencies(inits).withName("init").noOp();
      Manifest mf = new Manifest(List.of(
          new Manifest.Feed("x", "float32", new long[] {batch, in}, "normal"),
          new Manifest.Feed("labels", "float32", new long[] {batch, 10}, "onehot")),
          "loss", "train_op", "init");
      return new TrainingGraph(g.toGraphDef(), mf);
    }
  }
}
