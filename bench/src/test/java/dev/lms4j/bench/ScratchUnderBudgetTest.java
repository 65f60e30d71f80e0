package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.ScratchEstimates;
import dev.lms4j.tf.ScratchTrace;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.corpus.Corpus;
import java.nio.file.Path;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Kernel scratch on a small convolutional graph (the corpus's resnet-resource, small size),
 * checked against real budgeted runs: the memory model without scratch accepts a budget that
 * runs out of memory; with the scratch one traced step measured, it predicts the budget fails,
 * and a budget a little above its prediction trains.
 */
class ScratchUnderBudgetTest {
  private static final long MIB = 1L << 20;

  @Test
  void tracedScratchPredictsTheRealBudget(@TempDir Path dir) throws Exception {
    // TensorFlow's own convolution gradients take a col buffer; where oneDNN runs them (AVX-512
    // VNNI/BF16) they take none, so there is no scratch for the old model to miss (that side is
    // checked by MeasuredScratchTest and ScratchEstimatesTest; named in .ci/allowed-skips)
    Assumptions.assumeFalse(ScratchEstimates.host().oneDnn(),
        "oneDNN runs the convolutions here: their gradients take no scratch");
    TrainingGraph tg = Corpus.getOrThrow("resnet-resource").build(Corpus.Size.SMALL, 42);
    tg.write(dir.resolve("g.pb"), dir.resolve("m.json"));
    ScratchTrace trace = TraceWorker.trace(dir.resolve("g.pb"), dir.resolve("m.json"),
        BudgetedRunner.UNBUDGETED_MIB);
    // the largest scratch of the step is a convolution gradient's
    ScratchTrace.Node largest = trace.nodes().stream()
        .max(java.util.Comparator.comparingLong(ScratchTrace.Node::scratchBytes)).orElseThrow();
    assertThat(largest.type()).startsWith("Conv2DBackprop");
    DataflowGraph model = Fidelity.model(tg);
    long old = Fidelity.levelledPeak(model.withoutScratch());
    long measured = Fidelity.levelledPeak(model.withScratch(trace.scratchByOp()));
    assertThat(measured - old).as("old %d, measured %d", old, measured).isGreaterThan(4 * MIB);
    // halfway between the two predictions: the old model says it fits, the new one that it
    // does not; TensorFlow agrees with the new one
    long between = (old + measured) / 2;
    org.slf4j.LoggerFactory.getLogger(ScratchUnderBudgetTest.class).info(String.format(
        java.util.Locale.ROOT, "predicted %.2f MiB without scratch, %.2f MiB with the traced "
            + "scratch (largest %.2f MiB, %s); runs at %d and %d MiB", old / (double) MIB,
        measured / (double) MIB, largest.scratchBytes() / (double) MIB, largest.name(),
        between >> 20, ((long) (measured * 1.15) + MIB) >> 20));
    RunResult mid = BudgetedRunner.run(tg, BudgetedRunner.Options.of(between, 2));
    assertThat(mid.oom()).as("at %d MiB (old %.1f, measured %.1f): %s", between >> 20,
        old / (double) MIB, measured / (double) MIB, mid).isTrue();
    // a little above the new prediction it trains
    long above = (long) (measured * 1.15) + MIB;
    RunResult fits = BudgetedRunner.run(tg, BudgetedRunner.Options.of(above, 2));
    assertThat(fits.fits()).as("at %d MiB: %s", above >> 20, fits).isTrue();
  }
}
