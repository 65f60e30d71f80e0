package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.tf.run.StepLoop;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.op.Ops;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt64;

/**
 * A step run by {@link StepLoop} (the probe's, {@code run}'s and the bench's workers') fetches
 * the manifest's metrics as the Trainer does: the memory model holds every tensor of the run
 * ops, and a probe that left the metric ops out would measure a smaller step than training runs.
 */
class StepLoopMetricsTest {
  @Test
  void theMetricOpsRunAndTheirTensorsAreFetched() {
    TrainingGraph base = TinyNet.build(8, 16, 1);
    TrainingGraph tg = withAccuracy(base);
    // the metric reads the logits but nothing the train op needs reads the metric
    assertThat(GraphImporter.ancestors(tg.graphDef(), java.util.Set.of("loss:0", "train_op")))
        .doesNotContain("accuracy");

    List<String> ran = new ArrayList<>();
    StepLoop.Trace t = StepLoop.run(tg.graphDef(), tg.manifest(), SessionConfigs.lms(), 1, 1,
        r -> { });
    t.stats().nodes().forEach(n -> ran.add(n.name()));
    assertThat(ran).contains("accuracy", "argmax_logits", "loss", "train_op");

    // and without the metric in the manifest, the same graph's step does not run it
    List<String> without = new ArrayList<>();
    StepLoop.run(tg.graphDef(), base.manifest(), SessionConfigs.lms(), 1, 1, r -> { })
        .stats().nodes().forEach(n -> without.add(n.name()));
    assertThat(without).contains("loss").doesNotContain("accuracy", "argmax_logits");
  }

  /** {@code base} with an accuracy op over its logits ({@code layer1}), named as a metric. */
  private static TrainingGraph withAccuracy(TrainingGraph base) {
    try (Graph g = new Graph()) {
      g.importGraphDef(base.graphDef());
      Ops tf = Ops.create(g);
      Operand<TFloat32> logits = g.operation("layer1").output(0);
      Operand<TFloat32> labels = g.operation("labels").output(0);
      Operand<TInt64> predicted = tf.withName("argmax_logits").math.argMax(logits,
          tf.constant(1));
      Operand<TInt64> truth = tf.withName("argmax_labels").math.argMax(labels, tf.constant(1));
      tf.withName("accuracy").math.mean(
          tf.dtypes.cast(tf.math.equal(predicted, truth), TFloat32.class), tf.constant(0));
      Manifest m = base.manifest();
      return new TrainingGraph(g.toGraphDef(), new Manifest(m.feeds(), m.loss(), m.trainOp(),
          m.init(), Map.of("accuracy", "accuracy:0")));
    }
  }
}
