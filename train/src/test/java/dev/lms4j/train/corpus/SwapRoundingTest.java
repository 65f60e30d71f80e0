package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.data.Offset.offset;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.StepLoop;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.GraphOptions;
import org.tensorflow.proto.RewriterConfig;

/**
 * Why swap-only plans for the corpus encoder (benchmark size, framework Adam) can move its third
 * loss by about 1e-7: grappler's arithmetic optimizer, not the plan. Found on 2026-11-27 (oneDNN
 * on) by running every mode's plan four steps on every corpus family: tflms at 95 MiB reached
 * 9.261333465576172 where the unmodified graph reaches 9.261334419250488. Bisected to single
 * swaps: the attention softmax (its swap-in read by {@code Multiply_112 = 0.5 * s} whose one
 * reader is {@code Multiply_113 = Multiply_112 * (g - sum)}) and the GELU's input; with the
 * softmax swapped, grappler's output graph computes that product as {@code (0.5 * (g - sum)) * s}
 * instead of {@code (0.5 * s) * (g - sum)} (read from its partition graphs), which rounds
 * differently. With arithmetic optimization off the plan and the unmodified graph reach the same
 * losses bit for bit. (A swap-in whose static shape is unknown, as the standard
 * {@code ParseTensor} path has, also lets grappler keep a reshape it otherwise drops, and that
 * reorders a five-input gradient sum; the native swap-in keeps the shape.)
 */
class SwapRoundingTest {
  private static final int STEPS = 3;

  private static List<Double> losses(TrainingGraph tg, GraphDef gd, boolean arithmetic) {
    RewriterConfig.Builder rw = RewriterConfig.newBuilder()
        .setDependencyOptimization(RewriterConfig.Toggle.OFF);
    if (!arithmetic) {
      rw.setArithmeticOptimization(RewriterConfig.Toggle.OFF);
    }
    ConfigProto c = ConfigProto.newBuilder().setInterOpParallelismThreads(-1)
        .setGraphOptions(GraphOptions.newBuilder().setRewriteOptions(rw)).build();
    List<Double> out = new ArrayList<>();
    StepLoop.run(gd, tg.manifest(), c, STEPS, 42, rec -> out.add(rec.loss()));
    return out;
  }

  @Test
  void grapplerReordersAProductOfTheSwappedSoftmaxOnlyWithArithmeticOptimizationOn() {
    TrainingGraph tg = Corpus.Family.ENCODER.build(Corpus.Size.BENCH, 42);
    LmsResult lr = Lms.builder().budget(95L << 20).mode(LmsMode.TFLMS).build().rewrite(tg);
    assertThat(lr.plan().swapOuts()).anySatisfy(s -> assertThat(s.producer()).isEqualTo("Softmax"));
    // arithmetic optimization off: the plan changes nothing in the math
    assertThat(losses(tg, lr.graphDef(), false))
        .containsExactlyElementsOf(losses(tg, tg.graphDef(), false));
    // on (TensorFlow's default): the losses agree to rounding
    List<Double> ref = losses(tg, tg.graphDef(), true);
    List<Double> lms = losses(tg, lr.graphDef(), true);
    for (int i = 0; i < STEPS; i++) {
      assertThat(lms.get(i)).as("loss %d", i + 1).isCloseTo(ref.get(i),
          offset(1e-6 * Math.abs(ref.get(i))));
    }
  }
}
