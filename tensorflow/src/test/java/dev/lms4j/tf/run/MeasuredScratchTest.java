package dev.lms4j.tf.run;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.ScratchEstimates;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.AdamNetAccess;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.TrainingGraph;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.NodeDef;

/**
 * Measured kernel scratch end to end: a worker's traced step reports each op's scratch
 * ({@link RunResult#scratchByOp()}, from {@code ScratchTrace}), and {@code LmsBuilder.scratch}
 * puts a measured figure into the graph model every planner simulates.
 */
class MeasuredScratchTest {

  @Test
  void aWorkerReportsScratchPerOpAndTheModelTakesMeasuredScratch() throws Exception {
    TrainingGraph tg = AdamNetAccess.cnn(8, 16, 8, 32);
    RunResult r = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, 2));
    assertThat(r.fits()).as(r.toString()).isTrue();
    Set<String> nodes = tg.graphDef().getNodeList().stream().map(NodeDef::getName)
        .collect(Collectors.toSet());
    assertThat(r.scratchByOp()).isNotEmpty();
    // graph nodes, and the executor's own (_SOURCE, _arg_x_0_1, _retval_loss_0_0)
    assertThat(r.scratchByOp()).allSatisfy((op, bytes) -> {
      assertThat(nodes.contains(op) || op.startsWith("_")).as(op).isTrue();
      assertThat(bytes).isNotNegative();
    });
    String filterGrad = tg.graphDef().getNodeList().stream()
        .filter(n -> n.getOp().equals("Conv2DBackpropFilter")).findFirst().orElseThrow()
        .getName();
    // the traced scratch is what this CPU's kernel asks for: TensorFlow's own im2col buffer
    // (tens of MiB), or none where oneDNN runs the gradient (AVX-512 VNNI/BF16); the estimate
    // knows which (the allocator may hand out a larger chunk, hence up to twice the request)
    DataflowGraph model = GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(),
        -1, GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
    long estimate = ScratchEstimates.estimate(model, model.opOrThrow(filterGrad));
    assertThat(r.scratchByOp()).hasEntrySatisfying(filterGrad, bytes -> {
      if (ScratchEstimates.host().oneDnn()) {
        assertThat(estimate).isZero();
        assertThat(bytes).as("oneDNN's filter gradient").isLessThan(1L << 20);
      } else {
        assertThat(estimate).isGreaterThan(1L << 20);
        assertThat(bytes).as("TensorFlow's filter gradient")
            .isBetween(estimate * 9 / 10, 2 * estimate);
      }
    });
    Lms lms = Lms.builder().budget(1L << 30).mode(LmsMode.AUTO).build();
    long estimated = lms.rewrite(tg).predictedPeakBefore();
    long measured = lms.withScratch(Map.of(filterGrad, 64L << 20)).rewrite(tg)
        .predictedPeakBefore();
    // the op holds 64 MiB while it runs: the peak is at least that, and above the estimate's
    assertThat(measured).isGreaterThanOrEqualTo(64L << 20).isGreaterThan(estimated);
  }
}
