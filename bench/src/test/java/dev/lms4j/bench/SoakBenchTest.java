package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

/** The soak's leak figure: the least-squares slope of RSS over steps and over minutes. */
class SoakBenchTest {

  @Test
  void theSlopeIsTheLeastSquaresLineThroughTheSamples() {
    // step, minutes, RSS MiB, swap bytes: RSS grows 0.5 MiB per 100 steps, steps take 0.01 min
    double[][] pts = new double[20][];
    for (int i = 0; i < pts.length; i++) {
      double step = 100 + 10 * i;
      pts[i] = new double[] {step, step / 100.0, 400 + 0.005 * step + (i % 2 == 0 ? 0.1 : -0.1),
          0};
    }
    assertThat(1000 * SoakBench.slope(pts, 0)).isCloseTo(5.0, within(0.2));
    assertThat(SoakBench.slope(pts, 1)).isCloseTo(0.5, within(0.02));
    // flat RSS: slope 0; too few points: NaN
    double[][] flat = {{1, 0.1, 300, 0}, {2, 0.2, 300, 0}, {3, 0.3, 300, 0}};
    assertThat(SoakBench.slope(flat, 0)).isZero();
    assertThat(SoakBench.slope(new double[][] {{1, 1, 1, 0}}, 0)).isNaN();
  }
}
