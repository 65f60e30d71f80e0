package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.GradientSums;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.StepLoop;
import dev.lms4j.train.corpus.Corpus;
import dev.lms4j.train.models.ModelZoo;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.RewriterConfig;

/**
 * Why the running accumulations of gradient sums ({@code GradientSums}, run by {@code Lms}
 * before planning) can move a loss in its last bits: grappler's arithmetic optimizer rewrites
 * the unmodified graph's {@code AddN}s of partial gradients, so the reference does not add them
 * in input order; the chains (tagged so that grappler leaves them alone) add in input order,
 * which is the order TensorFlow's CPU AddN kernel uses. With arithmetic optimization off, the
 * unmodified and the chained graph give the same losses bit for bit; with lms4j's session
 * config (arithmetic optimization on) the zoo's gpt2 differs by a few ulps.
 */
class GradientSumsRoundingTest {

  @Test
  void chainsAddInInputOrderAndGrapplersArithmeticOptimizerIsWhatMovesTheReference() {
    TrainingGraph tg = ModelZoo.getOrThrow("gpt2").build(8,
        Map.of("layers", "2", "width", "128", "seq", "64", "heads", "4"));
    // a budget below the unplanned peak, so Lms runs its rewrites before planning
    LmsResult lr = Lms.builder().budget(21L << 20).mode(LmsMode.REMAT_XLA).build().rewrite(tg);
    assertThat(lr.preRewrites().gradientSums()).isPositive();

    ConfigProto on = SessionConfigs.lms();
    ConfigProto off = arithmeticOff(on);
    assertThat(losses(lr.graphDef(), tg, off)).containsExactlyElementsOf(losses(null, tg, off));

    assertCloseLosses(losses(lr.graphDef(), tg, on), losses(null, tg, on));
  }

  /**
   * The same on the corpus's DenseNet (bench size: its dense blocks' concatenations give 8
   * gradient sums of 4 or more partials): measured, the second loss 7.955094337463379 unmodified
   * and 7.9550933837890625 chained under lms4j's config; both 7.955093860626221 with arithmetic
   * optimization off. This is why the corpus benchmark marks densenet `!=` with the rewrites
   * before planning and `=` without them.
   */
  @Test
  void onDensenetTooTheChainsAgreeBitForBitWithArithmeticOptimizationOff() {
    TrainingGraph tg = Corpus.getOrThrow("densenet").build(Corpus.Size.BENCH, 42);
    GradientSums.Result gs = GradientSums.rewrite(tg, GradientSums.Options.defaults());
    assertThat(gs.chains()).isNotEmpty();
    ConfigProto on = SessionConfigs.lms();
    ConfigProto off = arithmeticOff(on);
    assertThat(losses(gs.graphDef(), tg, off)).containsExactlyElementsOf(losses(null, tg, off));
    assertCloseLosses(losses(gs.graphDef(), tg, on), losses(null, tg, on));
  }

  /** lms4j's session config with grappler's arithmetic optimizer off. */
  private static ConfigProto arithmeticOff(ConfigProto on) {
    return on.toBuilder().setGraphOptions(on.getGraphOptions().toBuilder()
        .setRewriteOptions(on.getGraphOptions().getRewriteOptions().toBuilder()
            .setArithmeticOptimization(RewriterConfig.Toggle.OFF))).build();
  }

  /** Each loss within a millionth (relative) of the reference's. */
  private static void assertCloseLosses(List<Double> losses, List<Double> reference) {
    assertThat(losses).hasSameSizeAs(reference);
    for (int i = 0; i < reference.size(); i++) {
      assertThat(losses.get(i)).as("loss %d", i + 1)
          .isCloseTo(reference.get(i), within(1e-6 * Math.abs(reference.get(i))));
    }
  }

  private static List<Double> losses(GraphDef gd, TrainingGraph tg, ConfigProto config) {
    List<Double> l = new ArrayList<>();
    StepLoop.run(gd == null ? tg.graphDef() : gd, tg.manifest(), config, 3, 42,
        r -> l.add(r.loss()));
    return l;
  }
}
