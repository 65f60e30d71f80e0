package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.types.TFloat32;

/**
 * Fed tensors live outside the budget on TensorFlow's CPU device: the caller allocates them
 * (TF Java through the C API's CPU allocator), the device's budgeted BFC allocator never sees
 * them, and the model ({@link DataflowGraph#hostFeeds()}) counts nothing for them.
 */
class HostFeedsUnderBudgetTest {
  private static final long MIB = 1 << 20;

  /** A 48 MiB feed summed into a scalar that a step adds to a variable. */
  private static TrainingGraph feedSum() {
    long n = 48 * MIB / 4;
    GraphDef gd;
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      var x = tf.withName("x").placeholder(TFloat32.class, Placeholder.shape(Shape.of(n)));
      var v = tf.withName("v").variable(Shape.scalar(), TFloat32.class);
      tf.withName("init").assign(v, tf.constant(0f));
      var loss = tf.withName("loss").sum(x, tf.constant(0));
      tf.withName("train").assignAdd(v, loss);
      gd = g.toGraphDef();
    }
    Manifest m = new Manifest(List.of(new Manifest.Feed("x", "float32", new long[] {n},
        "normal")), "loss", "train", "init");
    return new TrainingGraph(gd, m);
  }

  @Test
  void aFeedSixTimesTheBudgetTrainsAndTheModelCountsNothingForIt() throws Exception {
    TrainingGraph tg = feedSum();
    RunResult r = BudgetedRunner.run(tg, BudgetedRunner.Options.of(8 * MIB, 2));
    assertThat(r.fits()).as(r.toString()).isTrue();
    assertThat(r.peakBytes()).isLessThan(MIB);

    DataflowGraph g = GraphImporter.importGraph(tg.graphDef(), Map.of(), -1, "gradients",
        Set.of("loss", "train"));
    assertThat(g.hostFeeds()).isTrue();
    assertThat(g.opOrThrow("x").output(0).bytes()).isEqualTo(48 * MIB);
    assertThat(MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes())
        .isLessThan(MIB);
    assertThat(LowerBound.of(g)).isLessThan(MIB);
  }
}
