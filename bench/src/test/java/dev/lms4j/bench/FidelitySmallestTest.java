package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The fidelity bench's search for the smallest budget that really trains. */
class FidelitySmallestTest {

  private static final long MIB = 1L << 20;

  /**
   * A small graph trains far below the first bound (1.3 x guess + 16 MiB): GPT-2 b4, guessed
   * 3.3 MiB, trains at 4 MiB, under a quarter of its 20 MiB bound. Nothing below the bound may
   * be taken to fail unprobed.
   */
  @Test
  void findsANeedBelowAQuarterOfTheFirstBound() throws Exception {
    List<Long> probed = new ArrayList<>();
    long found = Fidelity.smallest((long) (3.3 * MIB), mib -> {
      probed.add(mib);
      return mib >= 4;
    });
    assertThat(found).isEqualTo(4);
    assertThat(probed).doesNotHaveDuplicates().contains(3L, 4L);
  }

  /** A bound that does not fit is doubled; the search then stays above it, each budget once. */
  @Test
  void doublesPastAFailingBoundAndProbesEachBudgetOnce() throws Exception {
    List<Long> probed = new ArrayList<>();
    // guess 100 MiB: first bound 146, fails; 292 fits; the need is 200
    long found = Fidelity.smallest(100 * MIB, mib -> {
      probed.add(mib);
      return mib >= 200;
    });
    assertThat(probed).startsWith(146L, 292L).doesNotHaveDuplicates();
    assertThat(probed).allMatch(m -> m >= 146);
    // within the resolution (3% of 292: 8 MiB) above the need
    assertThat(found).isBetween(200L, 208L);
  }

  @Test
  void nothingUpTo16GiBIsMinusOne() throws Exception {
    assertThat(Fidelity.smallest(100 * MIB, mib -> false)).isEqualTo(-1);
  }
}
