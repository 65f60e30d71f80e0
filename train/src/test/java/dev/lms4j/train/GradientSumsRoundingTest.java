package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.StepLoop;
import dev.lms4j.train.models.ModelZoo;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.ConfigProto;
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
    ConfigProto off = on.toBuilder().setGraphOptions(on.getGraphOptions().toBuilder()
        .setRewriteOptions(on.getGraphOptions().getRewriteOptions().toBuilder()
            .setArithmeticOptimization(RewriterConfig.Toggle.OFF))).build();
    assertThat(losses(lr, tg, off)).containsExactlyElementsOf(losses(null, tg, off));

    List<Double> reference = losses(null, tg, on);
    List<Double> chained = losses(lr, tg, on);
    for (int i = 0; i < reference.size(); i++) {
      assertThat(chained.get(i)).as("loss %d", i + 1)
          .isCloseTo(reference.get(i), within(1e-6 * Math.abs(reference.get(i))));
    }
  }

  private static List<Double> losses(LmsResult lr, TrainingGraph tg, ConfigProto config) {
    List<Double> l = new ArrayList<>();
    StepLoop.run(lr == null ? tg.graphDef() : lr.graphDef(), tg.manifest(), config, 3, 42,
        r -> l.add(r.loss()));
    return l;
  }
}
