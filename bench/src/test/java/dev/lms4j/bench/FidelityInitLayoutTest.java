package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.models.ModelZoo;
import org.junit.jupiter.api.Test;

/**
 * The fidelity bench replays a plan with the variables created in the order its init gives
 * them: LeNet's auto plan for 75 MiB creates the dense kernel last after a primer, and its
 * bisected real minimum (70 MiB, `bench --suite fidelity`, 2026-12-05) is the replay's need
 * with that order, not with the graph's (79 MiB). Planning only, no worker.
 */
class FidelityInitLayoutTest {

  @Test
  void aPlansReorderedInitIsReplayedAsItRuns() {
    TrainingGraph tg = ModelZoo.getOrThrow("lenet").build(100, java.util.Map.of());
    LmsResult lr = Lms.builder().budget(75L << 20).mode(LmsMode.AUTO).build().rewrite(tg);
    LmsResult.InitLayout init = lr.initLayout();
    assertThat(init).as("the plan reorders init").isNotNull();
    assertThat(init.needAfter()).isLessThan(init.needBefore());
    long withGraphOrder = Fidelity.allocatorMin(lr.model(), lr.memoryPlan());
    long withPlansOrder = Fidelity.allocatorMin(lr.model(), lr.memoryPlan(), init);
    assertThat(withPlansOrder).isLessThan(withGraphOrder);
    assertThat(withPlansOrder >> 20).isEqualTo(dev.lms4j.core.plan.Budget.mibUp(init.needAfter()));
  }
}
