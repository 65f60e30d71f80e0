package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The soak's leak figure: the least-squares slope of RSS over steps and over minutes, and the
 * split of a worker's RSS by kind of mapping that says where a slope comes from.
 */
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
    // growth: last minus first of a column (a one-off step counts, the path between does not)
    double[][] step = {{700, 0, 400, 0}, {800, 0, 409, 0}, {900, 0, 409, 0}, {1000, 0, 409.5, 0}};
    assertThat(SoakBench.growth(step, 2)).isCloseTo(9.5, within(1e-9));
    assertThat(SoakBench.growth(new double[0][], 2)).isNaN();
  }

  @Test
  void residentMemoryIsSplitIntoJitCodeAnonymousAndFileBackedMappings() {
    // an excerpt of a worker JVM's /proc/PID/smaps: the Java heap (anonymous, rw), the code
    // cache (anonymous, rwx), a library (file, r-x and rw), the malloc heap and a thread stack
    List<String> smaps = List.of(
        "c0000000-c7e00000 rw-p 00000000 00:00 0 ",
        "Size:             129024 kB",
        "Rss:              112220 kB",
        "Pss:              112220 kB",
        "Anonymous:        112220 kB",
        "VmFlags: rd wr mr mw me ac sd ",
        "7f1c8d400000-7f1c8d7b0000 rwxp 00000000 00:00 0 ",
        "Size:               3776 kB",
        "Rss:                3732 kB",
        "7f1ca0000000-7f1ca8000000 r-xp 00100000 08:01 1234   /opt/lib/libtensorflow_cc.so.2",
        "Size:             131072 kB",
        "Rss:              200000 kB",
        "7f1ca8000000-7f1ca8100000 rw-p 08100000 08:01 1234   /opt/lib/libtensorflow_cc.so.2",
        "Rss:                1000 kB",
        "557da5c09000-557da5c50000 rw-p 00000000 00:00 0                          [heap]",
        "Rss:                 132 kB",
        "7ffd5e6f1000-7ffd5e712000 rw-p 00000000 00:00 0                          [stack]",
        "Rss:                  40 kB",
        "7ffd5e7f0000-7ffd5e7f2000 r-xp 00000000 00:00 0                          [vdso]",
        "Rss:                   4 kB");
    SoakBench.Resident r = SoakBench.resident(smaps);
    // code: the rwx anonymous mapping and [vdso] (anonymous, executable): 3732 + 4
    assertThat(r.codeKib()).isEqualTo(3736);
    // anon: Java heap + [heap] + [stack]: 112220 + 132 + 40; "Anonymous:" and "Pss:" not counted
    assertThat(r.anonKib()).isEqualTo(112392);
    assertThat(r.fileKib()).isEqualTo(201000);
    assertThat(r.totalKib()).isEqualTo(3736 + 112392 + 201000);
    assertThat(SoakBench.resident(List.of())).isEqualTo(new SoakBench.Resident(0, 0, 0));
  }

  @Test
  void flatAfterTheWarmUpNeedsBothTheSlopeAndTheTailWithinHalfAMibPer1000Steps() {
    // 1000 measured steps sampled every 10 (steps 1000..1990), step, minutes, RSS MiB
    // flat with noise of +-0.02 MiB: slope ~0, tail growth 0: met
    assertThat(SoakBench.Flatness.of(series(i -> 470 + (i % 2 == 0 ? 0.02 : -0.02))).met())
        .isTrue();
    // a leak of 1 KiB per step: 0.98 MiB per 1000 steps, the tail grows 0.29 MiB: not met
    SoakBench.Flatness leak = SoakBench.Flatness.of(series(i -> 470 + 10 * i / 1024.0));
    assertThat(leak.slopeMibPer1000Steps()).isCloseTo(0.977, within(0.001));
    assertThat(leak.tailSteps()).isEqualTo(300);
    assertThat(leak.tailGrowthMib()).isCloseTo(0.293, within(0.001));
    assertThat(leak.met()).isFalse();
    // 0.4 MiB per 1000 steps: slope 0.4 <= 0.5 and tail 0.12 <= 0.15: met
    SoakBench.Flatness slow = SoakBench.Flatness.of(series(i -> 470 + 0.004 * i));
    assertThat(slow.slopeMibPer1000Steps()).isCloseTo(0.4, within(1e-9));
    assertThat(slow.tailLimitMib()).isCloseTo(0.15, within(1e-9));
    assertThat(slow.met()).isTrue();
    // a one-off jump of 0.7 MiB halfway (step 1500): slope 1.5 * 0.7 = 1.05, tail 0: not met
    SoakBench.Flatness jump = SoakBench.Flatness.of(series(i -> i < 50 ? 470 : 470.7));
    assertThat(jump.slopeMibPer1000Steps()).isCloseTo(1.05, within(0.01));
    assertThat(jump.tailGrowthMib()).isZero();
    assertThat(jump.met()).isFalse();
    // a jump of 0.2 MiB in the last 300 steps (step 1950) with a slope of only ~0.07: not met
    SoakBench.Flatness late = SoakBench.Flatness.of(series(i -> i < 95 ? 470 : 470.2));
    assertThat(late.slopeMibPer1000Steps()).isLessThan(0.5);
    assertThat(late.tailGrowthMib()).isCloseTo(0.2, within(1e-9));
    assertThat(late.met()).isFalse();
    // RSS going down is flat; no samples is not met
    assertThat(SoakBench.Flatness.of(series(i -> 480 - 0.01 * i)).met()).isTrue();
    assertThat(SoakBench.Flatness.of(new double[0][]).met()).isFalse();
  }

  /** 100 samples at steps 1000, 1010, ..., 1990 with RSS {@code rss.applyAsDouble(i)}. */
  private static double[][] series(java.util.function.IntToDoubleFunction rss) {
    double[][] pts = new double[100][];
    for (int i = 0; i < pts.length; i++) {
      pts[i] = new double[] {1000 + 10 * i, i / 6.0, rss.applyAsDouble(i)};
    }
    return pts;
  }

  @Test
  void theCompilationCountIsReadFromJstatOutput() {
    String out = "Compiled Failed Invalid   Time   FailedType FailedMethod\n"
        + "    2185      1       0    12.34          1 java/lang/String hashCode\n";
    assertThat(SoakBench.parseCompiled(out)).hasValue(2185);
    assertThat(SoakBench.parseCompiled("12345: Could not attach\n")).isEmpty();
    assertThat(SoakBench.parseCompiled("")).isEmpty();
  }
}
