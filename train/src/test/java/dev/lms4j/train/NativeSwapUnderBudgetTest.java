package dev.lms4j.train;

import dev.lms4j.core.plan.LmsMode;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.NativeSwap;
import dev.lms4j.tf.SwapPath;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.models.ModelZoo;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The native swap path under a real budget (worker JVM, BFC limit): the zoo's mlp at batch 4096
 * needs ~316 MiB without LMS (LmsUnderBudgetTest); at 180 MiB it trains with swapping. The
 * native swap-outs' host copies must lie outside the budget (else the run could not fit: the
 * swapped bytes plus the measured peak exceed the budget), and the losses of the native, the
 * native-with-overlap and the standard runs equal the unbudgeted run's bit for bit.
 */
class NativeSwapUnderBudgetTest {
  private static final long MIB = 1 << 20;

  @Test
  void nativeAndStandardSwapsTrainToIdenticalLossesUnderABudget() throws Exception {
    // on linux-x86_64 the build fails without the library, so it must load (no silent skip)
    String os = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT);
    if (Boolean.getBoolean("lms4j.native.skip") || !os.contains("linux")
        || !System.getProperty("os.arch", "").matches("amd64|x86_64")) {
      assumeTrue(NativeSwap.load(), "native swap library not available: " + NativeSwap.status());
    }
    assertThat(NativeSwap.load()).as(NativeSwap.status()).isTrue();
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(4096, Map.of());
    long budget = 180 * MIB;
    RunResult free = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, 4));
    assertThat(free.fits()).as(free.toString()).isTrue();
    for (SwapPath path : new SwapPath[] {SwapPath.NATIVE, SwapPath.STANDARD}) {
      for (boolean overlap : path == SwapPath.NATIVE ? new boolean[] {false, true}
          : new boolean[] {false}) {
        LmsResult lr = Lms.builder().budget(budget).mode(LmsMode.TFLMS).swapPath(path)
            .swapOverlap(overlap).build().rewrite(tg);
        String op = path == SwapPath.STANDARD ? "SerializeTensor"
            : overlap ? NativeSwap.SWAP_OUT_ASYNC : NativeSwap.SWAP_OUT;
        assertThat(lr.graphDef().getNodeList()).anyMatch(n -> n.getOp().equals(op));
        RunResult on = BudgetedRunner.run(new TrainingGraph(lr.graphDef(), tg.manifest()),
            BudgetedRunner.Options.of(budget, 4));
        assertThat(on.fits()).as(path + " overlap " + overlap + ": " + on).isTrue();
        assertThat(on.losses()).as(path + " overlap " + overlap).containsExactly(free.losses());
        // the swapped tensors could not have been held inside the budget
        assertThat(on.peakBytes() + lr.plan().swapOutBytes()).isGreaterThan(budget);
        // the README: with LMS the measured peak runs up to ~17% above the prediction (this
        // plan: predicted 115.1 MiB, measured 134.1, +16.5%; see LmsUnderBudgetTest)
        assertThat(on.peakBytes()).as("measured against predicted %d", lr.predictedPeakAfter())
            .isLessThanOrEqualTo((long) (lr.predictedPeakAfter() * 1.17));
      }
    }
  }
}
