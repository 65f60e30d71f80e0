package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.SerialOrder;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.StepLoop;
import dev.lms4j.train.models.ModelZoo;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * A chained graph ({@link SerialOrder}) reaches the unchained graph's losses bit for bit, and
 * TensorFlow runs the same kernels for both. Before the chain left out the ops TensorFlow fuses
 * ({@code UnchainedOps}), a control edge on a convolution kept grappler's remapper from fusing it with
 * its bias add, and one on a filter gradient kept oneDNN's layout pass from merging it with the
 * bias gradient: with oneDNN on, the corpus DenseNet's second loss moved by 1 ulp. A control
 * edge out of such a filter gradient (the pin that runs it ahead of the chain's next op) leaves
 * the merge as it is.
 */
class SerialOrderLossesTest {

  private static List<Double> losses(GraphDef gd, TrainingGraph tg) {
    List<Double> out = new ArrayList<>();
    StepLoop.run(gd, tg.manifest(), SessionConfigs.lms(), 3, 42, r -> out.add(r.loss()));
    return out;
  }

  /**
   * How many of each fused or oneDNN kernel TensorFlow ran, and of the bias adds and bias
   * gradients it left apart: what a control edge in the wrong place changes. (The chain also
   * runs the manifest's metrics, which a step fetching only the loss leaves out.)
   */
  private static Map<String, Integer> kernels(TrainingGraph tg, GraphDef gd) {
    Map<String, Integer> out = new TreeMap<>();
    for (NodeDef n : PartitionGraphs.of(tg, gd, SessionConfigs.lms()).values()) {
      String op = n.getOp();
      if (op.startsWith("_") || op.equals("BiasAdd") || op.equals("BiasAddGrad")) {
        out.merge(n.getOp(), 1, Integer::sum);
      }
    }
    return out;
  }

  @Test
  void aChainedGraphRunsTheSameKernelsAndReachesTheSameLossesBitForBit() {
    for (String family : List.of("densenet", "unet", "gru")) {
      TrainingGraph tg = Corpus.getOrThrow(family).build(Corpus.Size.TEST, 42);
      SerialOrder.Result chained = SerialOrder.enforce(tg.graphDef(), tg.manifest());
      assertThat(chained.addedEdges()).isPositive();
      // each filter gradient oneDNN merges with its bias gradient is waited on by a chained op
      // (a pin, unless the graph had such an edge already), and still merged: the kernels below
      Map<String, List<String>> given = new TreeMap<>();
      tg.graphDef().getNodeList().forEach(n -> given.put(n.getName(), n.getInputList()));
      int pins = 0;
      for (String f : dev.lms4j.tf.UnchainedOps.merges(tg.graphDef()).values()) {
        assertThat(chained.graphDef().getNodeList()).as(family + ": waits on " + f)
            .anyMatch(n -> n.getInputList().contains("^" + f));
        pins += (int) chained.graphDef().getNodeList().stream()
            .filter(n -> n.getInputList().contains("^" + f)
                && !given.get(n.getName()).contains("^" + f)).count();
      }
      assertThat(pins > 0).as(family + ": pins added")
          .isEqualTo(!dev.lms4j.tf.UnchainedOps.merges(tg.graphDef()).isEmpty());
      assertThat(kernels(tg, chained.graphDef())).as(family)
          .isEqualTo(kernels(tg, tg.graphDef()));
      List<Double> plain = losses(tg.graphDef(), tg);
      assertThat(plain).hasSize(3);
      assertThat(losses(chained.graphDef(), tg)).as(family).isEqualTo(plain);
    }
  }

  /**
   * The zoo's LeNet, auto's plan for 88 MiB (a recomputed pool): ordered by the plan, the second
   * conv's bias update came before the recomputed pool, which the filter gradient reads; oneDNN
   * merges the bias gradient into that filter gradient, so the update waited on the pool and the
   * pool on the update. TensorFlow ended the step without running that cycle and without an
   * error: two layers' updates never ran, and the second loss was 3.5426 instead of 3.5362. The
   * chain now orders a merged bias gradient after the op it is merged into.
   */
  @Test
  void aPlanWhoseBiasGradientOneDnnMergesIsChainedWithoutACycle() {
    TrainingGraph tg = ModelZoo.getOrThrow("lenet").build(100, Map.of());
    LmsResult r = Lms.builder().budget(88L << 20).mode(LmsMode.AUTO).serialOrder(false).build()
        .rewrite(tg);
    assertThat(r.rewritten()).isTrue();
    SerialOrder.Result chained = SerialOrder.enforce(r.graphDef(), tg.manifest());
    assertThat(losses(chained.graphDef(), tg)).isEqualTo(losses(r.graphDef(), tg))
        .isEqualTo(losses(tg.graphDef(), tg));
    // and the kernels are the same, the merged filter gradients included
    TrainingGraph rewritten = new TrainingGraph(r.graphDef(), tg.manifest());
    assertThat(kernels(rewritten, chained.graphDef())).isEqualTo(kernels(rewritten,
        r.graphDef()));
  }
}
