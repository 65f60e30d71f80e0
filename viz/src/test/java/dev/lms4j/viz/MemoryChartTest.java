package dev.lms4j.viz;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.schedule.Scheduling;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYSeries;

class MemoryChartTest {
  @TempDir Path dir;

  @Test
  void curvesLinesAndMarkersOfAPlan() throws Exception {
    Fixtures.Planned p = Fixtures.auto(Fixtures.mlp(12), 50 * Fixtures.MIB);
    MemoryTimeline t = MemoryTimeline.of(p.model(), p.swap(), p.recompute());
    XYChart c = MemoryChart.chart(t, MemoryChart.Marks.of("mlp", p.budget()).memRatio(0.8)
        .measuredPeak(42 * Fixtures.MIB));
    assertThat(c.getSeriesMap()).containsOnlyKeys("before LMS: peak 90.0 MiB",
        "after LMS: peak 39.0 MiB", "budget 50.0 MiB", "planner target 40.0 MiB (80%)",
        "measured peak 42.0 MiB", "swap-out (7)", "swap-in (7)", "recompute (20)");
    assertThat(c.getYAxisTitle()).isEqualTo("device memory (MiB)");
    assertThat(c.getSeriesMap().get("budget 50.0 MiB").getYData()).containsOnly(50.0);
    XYSeries after = c.getSeriesMap().get("after LMS: peak 39.0 MiB");
    assertThat(after.getXData()).hasSize(t.after().order().length);
    assertThat(after.getYMax()).isEqualTo(39.0);
    // markers sit on the after curve where the inserted ops run
    XYSeries outs = c.getSeriesMap().get("swap-out (7)");
    for (int i = 0; i < outs.getXData().length; i++) {
      int pos = (int) outs.getXData()[i];
      assertThat(pos).isEqualTo(t.swapOuts()[i]);
      assertThat(outs.getYData()[i]).isEqualTo(after.getYData()[pos]);
    }
    Path svg = dir.resolve("m.svg");
    MemoryChart.write(t, MemoryChart.Marks.of("mlp", p.budget()), svg);
    assertThat(Files.readString(svg)).contains("<svg");
  }

  @Test
  void smallGraphsInKibAndTheOriginalBeforeAScheduledGraph() {
    var g = Fixtures.branches(8);
    Scheduling.Result s = Scheduling.apply(g, Scheduling.Scheduler.BEST);
    XYChart c = MemoryChart.chart(MemoryTimeline.of(g, s.graph(), null, null),
        MemoryChart.Marks.of(null, 0));
    assertThat(c.getYAxisTitle()).isEqualTo("device memory (KiB)");
    assertThat(c.getSeriesMap()).containsOnlyKeys("before LMS: peak 46.0 KiB",
        "after LMS: peak 26.0 KiB");
    assertThat(c.getTitle()).isEqualTo("Predicted device memory over one step");
  }
}
