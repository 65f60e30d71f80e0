package dev.lms4j.train.corpus;

import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.List;
import org.tensorflow.Output;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.types.TInt32;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.types.TFloat32;

/** Graphs the probe tests train (built with the corpus's {@link Net}). */
public final class ProbeGraphs {
  private ProbeGraphs() {}

  /**
   * One wide layer and a small head: a 2048 x 2048 float weight (16 MiB) whose gradient (16 MiB
   * more) is most of a step's peak, so the planner's floor (resident tensors plus the largest
   * op, the weight gradient's MatMul) is close to what TensorFlow really needs.
   */
  public static TrainingGraph wideDense() {
    try (Net n = new Net(Net.Vars.REF, 42)) {
      Operand<TFloat32> x = n.input("x", Shape.of(64, 2048), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(64, 10), "onehot");
      Net.Param w = n.filled("wide_w", Shape.of(2048, 2048), 0.01f);
      Operand<TFloat32> h = n.tf.nn.relu(n.tf.linalg.matMul(x, w.value()));
      Operand<TFloat32> logits = n.dense(h, "head", 2048, 10);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      return n.finish(n.updates(loss, n.params(), Net.Update.SGD, 0.01f));
    }
  }

  /**
   * A 65536 x 64 embedding table (16 MiB) of which a step looks up 256 rows and updates them
   * sparsely ({@code Gather}, {@code ScatterSub}): the table is nearly all of the memory, so the
   * planner's floor over its memory ratio lies above the budget at which TensorFlow trains.
   */
  public static TrainingGraph sparseTable() {
    int batch = 256;
    long rows = 65_536;
    int dim = 64;
    try (Net n = new Net(Net.Vars.REF, 42)) {
      Ops tf = n.tf;
      Placeholder<TInt32> ids = n.ids("ids", Shape.of(batch), rows);
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      Net.Param table = n.filled("table", Shape.of(rows, dim), 0.01f);
      Operand<TFloat32> looked = tf.withName("lookup").gather(table.value(), ids,
          tf.constant(0));
      Operand<TFloat32> logits = n.dense(looked, "head", dim, 10);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      List<Net.Param> head = n.params().subList(1, n.params().size());
      List<Operand<?>> wrt = new ArrayList<>();
      wrt.add(looked);
      for (Net.Param p : head) {
        wrt.add(p.value());
      }
      Output<?>[] grads = n.gradients(loss, wrt);
      Ops train = tf.withSubScope("train");
      Operand<TFloat32> rate = train.withName("learning_rate").constant(0.05f);
      Operand<TFloat32> step = train.withName("table_step").math.mul(
          grads[0].expect(TFloat32.class), rate);
      List<Op> updates = new ArrayList<>();
      @SuppressWarnings("unchecked")
      Variable<TFloat32> t = (Variable<TFloat32>) table.handle();
      updates.add(train.withName("table_update").scatterSub(t, ids, step));
      for (int i = 0; i < head.size(); i++) {
        @SuppressWarnings("unchecked")
        Variable<TFloat32> v = (Variable<TFloat32>) head.get(i).handle();
        updates.add(train.withName(head.get(i).name() + "_update").train.applyGradientDescent(v,
            rate, grads[i + 1].expect(TFloat32.class)));
      }
      return n.finish(updates);
    }
  }
}
