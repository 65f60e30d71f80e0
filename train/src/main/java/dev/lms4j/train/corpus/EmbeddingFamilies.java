package dev.lms4j.train.corpus;

import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.RandomStandardNormal;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;

/**
 * Click-model families: an embedding table of {@code rows x dim} looked up by {@code fields}
 * int32 ids per example (fill {@code ids}), the looked-up rows flattened into a 2-layer MLP with a
 * 2-class softmax loss.
 */
final class EmbeddingFamilies {
  private EmbeddingFamilies() {}

  /** How the table is read and updated. */
  enum Kind {
    /** {@code GatherV2} on a ref table; its gradient is a dense table-sized sum. */
    DENSE,
    /** {@code GatherV2} on a ref table; {@code ScatterSub} of the rows' gradient. */
    SPARSE,
    /** Resource variables: {@code ResourceGather}, {@code ResourceScatterSub}, momentum. */
    RESOURCE,
    /** As SPARSE, with an initialiser that holds three table-sized temporaries. */
    INIT_HEAVY
  }

  static TrainingGraph embedding(Kind kind, boolean small, long seed) {
    int batch = small ? 16 : 256;
    int fields = small ? 4 : 16;
    long rows = small ? 1000 : (kind == Kind.INIT_HEAVY ? 400_000 : 200_000);
    int dim = small ? 8 : 64;
    int hidden = small ? 16 : 256;
    float lr = 0.05f;
    Net.Vars vars = kind == Kind.RESOURCE ? Net.Vars.RESOURCE : Net.Vars.REF;
    try (Net n = new Net(vars, seed)) {
      Ops tf = n.tf;
      Placeholder<TInt32> ids = n.ids("ids", Shape.of(batch, fields), rows);
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 2), "onehot");
      Shape tableShape = Shape.of(rows, dim);
      Net.Param table = kind == Kind.INIT_HEAVY ? n.param("table", tableShape,
          heavyInit(tf, tableShape, seed)) : n.normal("table", tableShape, 0.05);
      Operand<TFloat32> looked = kind == Kind.RESOURCE
          ? tf.withName("lookup").resourceGather(table.handle(), ids, TFloat32.class)
          : tf.withName("lookup").gather(table.value(), ids, tf.constant(0));
      Operand<TFloat32> flat = tf.reshape(looked, tf.constant(new long[] {batch,
          (long) fields * dim}));
      Operand<TFloat32> h = tf.nn.relu(n.dense(flat, "fc1", (long) fields * dim, hidden));
      Operand<TFloat32> logits = n.dense(h, "fc2", hidden, 2);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      List<Net.Param> mlp = n.params().subList(1, n.params().size());
      if (kind == Kind.DENSE) {
        return n.finish(n.updates(loss, n.params(), Net.Update.SGD, lr));
      }
      // sparse: the gradient of the looked-up rows, scattered into the table
      List<Operand<?>> wrt = new ArrayList<>();
      wrt.add(looked);
      for (Net.Param p : mlp) {
        wrt.add(p.value());
      }
      Output<?>[] grads = n.gradients(loss, wrt);
      Ops train = tf.withSubScope("train");
      Operand<TFloat32> rate = train.withName("learning_rate").constant(lr);
      Operand<TFloat32> step = train.withName("table_step").math.mul(
          grads[0].expect(TFloat32.class), rate);
      List<Op> updates = new ArrayList<>();
      if (kind == Kind.RESOURCE) {
        updates.add(train.withName("table_update").resourceScatterSub(table.handle(), ids,
            step));
        updates.addAll(n.updates(mlp, grads, 1, Net.Update.MOMENTUM, lr));
      } else {
        @SuppressWarnings("unchecked")
        Variable<TFloat32> t = (Variable<TFloat32>) table.handle();
        updates.add(train.withName("table_update").scatterSub(t, ids, step));
        for (int i = 0; i < mlp.size(); i++) {
          @SuppressWarnings("unchecked")
          Variable<TFloat32> v = (Variable<TFloat32>) mlp.get(i).handle();
          updates.add(train.withName(mlp.get(i).name() + "_update").train.applyGradientDescent(v,
              rate, grads[i + 1].expect(TFloat32.class)));
        }
      }
      return n.finish(updates);
    }
  }

  /**
   * {@code 0.03 * clip(normal, -2, 2) + 0.01 * (uniform - 0.5)}: the normal draw, its clip, the
   * uniform draw and the sums are each table-sized, and several are alive at once.
   */
  private static Operand<TFloat32> heavyInit(Ops tf, Shape shape, long seed) {
    Ops init = tf.withSubScope("table_init");
    Operand<TInt32> dims = init.constant(new int[] {(int) shape.get(0), (int) shape.get(1)});
    Operand<TFloat32> normal = init.random.randomStandardNormal(dims, TFloat32.class,
        RandomStandardNormal.seed(seed), RandomStandardNormal.seed2(101L));
    Operand<TFloat32> uniform = init.random.randomUniform(dims, TFloat32.class,
        RandomUniform.seed(seed), RandomUniform.seed2(102L));
    Operand<TFloat32> clipped = init.clipByValue(normal, init.constant(-2f), init.constant(2f));
    return init.math.add(init.math.mul(clipped, init.constant(0.03f)),
        init.math.mul(init.math.sub(uniform, init.constant(0.5f)), init.constant(0.01f)));
  }
}
