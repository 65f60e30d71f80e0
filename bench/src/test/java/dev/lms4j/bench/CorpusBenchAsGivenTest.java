package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.bench.ModelBench.Method;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.corpus.Corpus;
import org.junit.jupiter.api.Test;

/**
 * Where an lms4j mode hands back the graph as given at TensorFlow's confirmed minimum or above,
 * the corpus bench takes TensorFlow's result for it instead of running the same graph again at
 * the edge, where one graph trains in some runs and not in others (embedding-dense at 118 MiB:
 * the unmodified graph trained 4 times, tflms's unchanged output then ran out of memory).
 */
class CorpusBenchAsGivenTest {

  @Test
  void aModeThatLeavesTheGraphAsGivenTakesTensorFlowsConfirmedMinimum() throws Exception {
    TrainingGraph tg = Corpus.getOrThrow("gru").build(Corpus.Size.SMALL, 42);
    CorpusBench.Probe tfMin = new CorpusBench.Probe();
    tfMin.mib = 512;
    tfMin.measuredPeak = 3L << 20;
    tfMin.identical = true;
    // 1 GiB: every planner says LMS is not necessary, so no worker runs (no reference needed)
    CorpusBench.Probe p = CorpusBench.attempt(tg, CorpusBench.Column.of(Method.TFLMS), 1024,
        new double[0], tfMin);
    assertThat(p.asGiven).isTrue();
    assertThat(p.mib).isEqualTo(1024);
    assertThat(p.measuredPeak).isEqualTo(3L << 20);
    assertThat(p.identical).isTrue();
    assertThat(p.tookTfResult).isTrue();
    // below TensorFlow's minimum nothing is taken over: the unchanged graph really runs (and
    // this small graph trains at 256 MiB, with its own traced peak)
    tfMin.mib = 2048;
    CorpusBench.Probe below = CorpusBench.attempt(tg, CorpusBench.Column.of(Method.TFLMS), 256,
        new double[0], tfMin);
    assertThat(below.asGiven).isTrue();
    assertThat(below.tookTfResult).isFalse();
    assertThat(below.mib).isEqualTo(256);
    assertThat(below.measuredPeak).isPositive().isNotEqualTo(3L << 20);
  }
}
