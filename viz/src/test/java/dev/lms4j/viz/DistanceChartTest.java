package dev.lms4j.viz;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.Liveness;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.graph.Levels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.knowm.xchart.CategoryChart;

class DistanceChartTest {
  @TempDir Path dir;

  @Test
  void bucketsMatchLivenessAndSplitWhatThePlanDoes() throws Exception {
    Fixtures.Planned p = Fixtures.auto(Fixtures.mlp(12), 50 * Fixtures.MIB);
    // the graph the swap planner saw: the original with the recomputed ops cloned
    DataflowGraph g = RecomputeApplier.apply(p.model(), p.recompute());
    DistanceChart.Histogram h = DistanceChart.histogram(p.model(), p.swap(), p.recompute());

    TreeMap<Integer, long[]> ref = Liveness.distanceHistogram(g, Levels.of(g));
    // every bucket from the first to the last key, with the same edges and bytes in total
    assertThat(h.labels()).hasSize(ref.lastKey() - ref.firstKey() + 1);
    assertThat(h.labels().get(0)).isEqualTo(ref.firstKey() < 0 ? "0" : "1");
    assertThat(h.labels()).contains("2-3", "4-7");
    for (int i = 0; i < h.labels().size(); i++) {
      long[] want = ref.getOrDefault(ref.firstKey() + i, new long[2]);
      long[] e = h.edges().get(i);
      long[] b = h.bytes().get(i);
      assertThat(e[0] + e[1] + e[2]).as("edges in bucket %s", h.labels().get(i))
          .isEqualTo(want[0]);
      assertThat(b[0] + b[1] + b[2]).isEqualTo(want[1]);
    }
    // swapped edges: one per consumer re-pointed to a swap-in (here the recomputed BiasAdds,
    // which read the swapped MatMul outputs late in the backward pass)
    long swapInConsumers = p.swap().swapOuts().stream().flatMap(so -> so.swapIns().stream())
        .mapToLong(si -> si.consumers().size()).sum();
    assertThat(h.totalEdges(1)).isEqualTo(swapInConsumers).isEqualTo(7);
    // recomputed edges: those read from a clone: each group's BiasAdd clone feeds its Relu
    // clone and one ReluGrad, the Relu clone one MatMul gradient
    assertThat(h.totalEdges(2)).isEqualTo(3L * p.recompute().groups().size());
    // swapping is for long distances: no swapped edge in the first two buckets (0 and 1), and
    // the clones run next to their readers
    assertThat(h.edges().get(0)[1] + h.edges().get(1)[1]).isZero();
    for (int i = 3; i < h.labels().size(); i++) {
      assertThat(h.edges().get(i)[2]).as("recomputed edges in bucket %s", h.labels().get(i))
          .isZero();
    }

    CategoryChart c = DistanceChart.chart(h, true, "mlp");
    assertThat(c.getSeriesMap()).containsOnlyKeys("kept", "swapped", "recomputed");
    Path out = dir.resolve("d.svg");
    DistanceChart.write(h, "mlp", out);
    assertThat(Files.readString(out)).contains("<svg");
  }

  @Test
  void withoutAPlanEveryEdgeIsKept() {
    DataflowGraph g = Fixtures.mlp(3);
    DistanceChart.Histogram h = DistanceChart.histogram(g, null, null);
    assertThat(h.totalEdges(1) + h.totalEdges(2)).isZero();
    assertThat(h.totalEdges(0)).isEqualTo(Liveness.distances(g, Levels.of(g)).size());
    assertThat(DistanceChart.chart(h, false, null).getSeriesMap()).containsOnlyKeys("kept");
  }
}
