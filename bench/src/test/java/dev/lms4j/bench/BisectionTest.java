package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class BisectionTest {

  @Test
  void stopsWithinTheResolutionAndKeepsTheLastFailure() throws Exception {
    List<Long> probed = new ArrayList<>();
    // fits from 56 MiB up; search (35, 191] in steps of 11 MiB
    Bisection.Edge e = Bisection.search(35, 191, 11, mib -> {
      probed.add(mib);
      return mib >= 56;
    });
    // probes: 191 fits, 113 fits, 74 fits, 54 fails, 64 fits; 64 - 54 <= 11 stops
    assertThat(probed).containsExactly(191L, 113L, 74L, 54L, 64L);
    assertThat(e).isEqualTo(new Bisection.Edge(54, 64));
    assertThat(e.unknown(63)).isTrue();
    assertThat(e.unknown(56)).isTrue();
    assertThat(e.unknown(54)).isFalse();
    assertThat(e.unknown(64)).isFalse();
    assertThat(e.unknown(100)).isFalse();
  }

  /** A top that fails once and trains on its second probe: searched below with two tries. */
  @Test
  void theTopIsProbedAgainWhenAskedTo() throws Exception {
    List<Long> probed = new ArrayList<>();
    int[] topRuns = {0};
    Bisection.Probe flaky = mib -> {
      probed.add(mib);
      if (mib == 100) {
        return ++topRuns[0] > 1;
      }
      return mib >= 60;
    };
    assertThat(Bisection.search(10, 100, 20, 1, flaky).fits()).isEqualTo(-1);
    probed.clear();
    topRuns[0] = 0;
    Bisection.Edge e = Bisection.search(10, 100, 20, 2, flaky);
    // 100 fails, 100 fits, 55 fails, 77 fits; 77 - 55 > 20: 66 fits; 66 - 55 <= 20 stops
    assertThat(probed).containsExactly(100L, 100L, 55L, 77L, 66L);
    assertThat(e).isEqualTo(new Bisection.Edge(55, 66));
    // a top that never fits is probed twice, then nothing fits
    probed.clear();
    assertThat(Bisection.search(10, 100, 20, 2, mib -> {
      probed.add(mib);
      return false;
    }).fits()).isEqualTo(-1);
    assertThat(probed).containsExactly(100L, 100L);
  }

  @Test
  void nothingFitsWhenTheTopFails() throws Exception {
    Bisection.Edge e = Bisection.search(10, 100, 5, mib -> false);
    assertThat(e.fits()).isEqualTo(-1);
    assertThat(e.unknown(50)).isFalse();
    assertThat(Bisection.smallest(10, 100, 5, mib -> false)).isEqualTo(-1);
  }
}
