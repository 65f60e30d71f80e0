package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.schedule.AddNChains;
import dev.lms4j.tf.GradientSums;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.StepLoop;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.NodeDef;

/**
 * The unrolled LSTM's gradient sums (one 8-input AddN per shared weight at the small size) become
 * running accumulations: no AddN of 4 or more inputs is left, the floor (which the AddN's inputs
 * set) drops, and the losses stay bit-identical in input order. (Measured at the bench size, 50
 * steps: unbudgeted peak 162.4 MiB before, 22.3 MiB after, losses identical.)
 */
class GradientSumsTest {

  @Test
  void lstmSumsBecomeChainsWithIdenticalLosses() {
    TrainingGraph tg = Corpus.Family.LSTM.build(Corpus.Size.SMALL, 3);
    GradientSums.Options all = new GradientSums.Options(4, 0, GradientSums.Order.INPUT);
    GradientSums.Result r = GradientSums.rewrite(tg, all);
    TrainingGraph chained = new TrainingGraph(r.graphDef(), tg.manifest());

    DataflowGraph before = model(tg);
    DataflowGraph after = model(chained);
    // the two LSTM kernels and their biases, 8 partial gradients each (one per step)
    assertThat(r.chains()).hasSize(4).allSatisfy(c -> assertThat(c.inputs()).hasSize(8));
    assertThat(after.ops().stream().filter(o -> AddNChains.TYPES.contains(o.type())
        && o.inputs().size() >= 4)).isEmpty();
    assertThat(LowerBound.of(after)).isLessThan(LowerBound.of(before));
    for (AddNChains.Chain c : r.chains()) {
      NodeDef last = r.graphDef().getNodeList().stream()
          .filter(n -> n.getName().equals(c.op())).findFirst().orElseThrow();
      assertThat(last.getOp()).isEqualTo("AddV2");
    }
    assertThat(losses(chained)).isEqualTo(losses(tg));

    // a threshold above every sum leaves the graph alone
    GradientSums.Result none = GradientSums.rewrite(tg,
        new GradientSums.Options(4, 1L << 40, GradientSums.Order.INPUT));
    assertThat(none.chains()).isEmpty();
    assertThat(none.graphDef()).isEqualTo(tg.graphDef());
  }

  private static DataflowGraph model(TrainingGraph tg) {
    return GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(), -1,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
  }

  private static List<Double> losses(TrainingGraph tg) {
    List<Double> out = new ArrayList<>();
    StepLoop.run(tg.graphDef(), tg.manifest(), SessionConfigs.lms(), 3, 42,
        s -> out.add(s.loss()));
    return out;
  }
}
