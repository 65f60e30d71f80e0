package dev.lms4j.train;

import dev.lms4j.core.plan.LmsMode;
import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.models.ModelZoo;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The headline claim, per model and strategy: at a budget between the LMS peak and the no-LMS
 * peak, the run without LMS runs out of memory, and the run with LMS trains 5 steps whose losses
 * equal the unbudgeted run's bit for bit (ops run in the caller's thread: deterministic kernels
 * and order).
 */
class LmsUnderBudgetTest {
  private static final long MIB = 1 << 20;

  static Stream<Arguments> cases() {
    return Stream.of(
        // mlp, batch 4096: 8 layers of 16 MiB activations (MatMul, BiasAdd, Relu each) + 31 MiB
        // of weights. Measured without LMS: ~316 MiB. With LMS at 180 MiB the planner may use
        // 0.8 x 180 = 144 MiB (simulated), which measured ~130 MiB here. 180 lies between.
        Arguments.of("mlp", 4096, Map.of(), LmsMode.TFLMS, 180L),
        // resnet (2 blocks x 3 stages, width 64, 64x64 images), batch 32: measured without LMS
        // ~197 MiB. The floor is 11 MiB of weights + feeds + 96 MiB for the largest op (the
        // stem's ReluGrad: three 32 MiB tensors) = ~108 MiB. With LMS at 150 MiB the planner
        // may use 120 MiB (simulated), which measured ~113-130 MiB. 150 lies between.
        Arguments.of("resnet", 32, Map.of(), LmsMode.TFLMS, 150L),
        // recomputation: mlp's BiasAdd+ReLU pairs recomputed from the MatMul outputs; the
        // planner simulates ~236 MiB for the 0.8 x 300 = 240 MiB it may use (measured ~236)
        Arguments.of("mlp", 4096, Map.of(), LmsMode.REMAT, 300L),
        // resnet, 6 blocks per stage: ~454 MiB without LMS; recomputing the cheap groups gives
        // a simulated 300 MiB (measured ~314) within 0.8 x 380 = 304 MiB
        Arguments.of("resnet", 32, Map.of("blocks", "6"), LmsMode.REMAT, 380L));
  }

  @ParameterizedTest(name = "{0} batch {1} {3} at {4} MiB")
  @MethodSource("cases")
  void lmsTrainsWhereNoLmsRunsOutOfMemory(String model, int batch, Map<String, String> options,
      LmsMode strategy, long budgetMib) throws Exception {
    TrainingGraph tg = ModelZoo.getOrThrow(model).build(batch, options);
    long budget = budgetMib * MIB;

    RunResult free = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, 5));
    assertThat(free.fits()).as(free.toString()).isTrue();
    assertThat(free.peakBytes()).as("the unbudgeted peak must exceed the budget")
        .isGreaterThan(budget);

    RunResult off = BudgetedRunner.run(tg, BudgetedRunner.Options.of(budget, 5));
    assertThat(off.fits()).isFalse();
    assertThat(off.oom()).as(off.toString()).isTrue();

    LmsResult lr = Lms.builder().budget(budget).mode(strategy).build().rewrite(tg);
    assertThat(lr.rewritten()).isTrue();
    if (strategy == LmsMode.TFLMS) {
      assertThat(lr.plan().swapOuts()).isNotEmpty();
    } else {
      assertThat(lr.recompute().clonedOps()).isPositive();
      assertThat(lr.plan().swapOuts()).isEmpty();
    }
    assertThat(lr.predictedPeakAfter()).isLessThanOrEqualTo((long) (budget * 0.8));
    RunResult on = BudgetedRunner.run(new TrainingGraph(lr.graphDef(), tg.manifest()),
        BudgetedRunner.Options.of(budget, 5));
    assertThat(on.fits()).as(on.toString()).isTrue();
    assertThat(on.steps()).hasSize(5);
    assertThat(on.losses()).containsExactly(free.losses());
    // the README: with LMS the measured peak runs up to ~17% above the prediction (a run that
    // fit under the budget cannot show a peak above it, so that check could not fail). The mlp
    // at 180 MiB misses by about 19 MiB whatever the plan: tflms's plan at memory ratio 0.72
    // (predicted 127.3 MiB) measured 146.3 (+14.9%); since the allocator check also asks the
    // chunks in use to leave its headroom (2026-12-06) it re-plans at 0.68 (predicted 115.1),
    // which measured 134.1 (+16.5%)
    assertThat(on.peakBytes()).as("measured against predicted %d", lr.predictedPeakAfter())
        .isLessThanOrEqualTo((long) (lr.predictedPeakAfter() * 1.17));

    // the simulator against measurement: without LMS it has been within 2% here; with LMS the
    // measured peak ran 10-16% above the prediction (kernels keep memory the model does not see)
    assertThat((double) lr.predictedPeakBefore()).isCloseTo((double) free.peakBytes(),
        org.assertj.core.data.Percentage.withPercentage(10));
    assertThat((double) lr.predictedPeakAfter()).isCloseTo((double) on.peakBytes(),
        org.assertj.core.data.Percentage.withPercentage(25));
  }
}
