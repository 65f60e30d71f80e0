package dev.lms4j.viz;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.Liveness;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.graph.Levels;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.CategorySeries;
import org.knowm.xchart.style.Styler;

/**
 * TFLMS's producer-consumer distance histogram: data edges bucketed by the consumer's level minus
 * the producer's, in powers of two (the buckets of {@link Liveness#distanceHistogram}). With a
 * plan, the edges are those of the graph the swap planner saw, the original with the recomputed
 * ops cloned (as {@code Lms}'s auto strategy plans), stacked by what the plan does to them:
 * kept, swapped (the consumer reads a swap-in) or recomputed (the producer is a clone, run late
 * in the backward pass, so the long edge it replaces is gone). Long distances are what swapping
 * is for; {@code swapout_threshold} cuts the edges to the right of it.
 *
 * <pre>{@code
 * DistanceChart.Histogram before = DistanceChart.histogram(model, null, null);
 * DistanceChart.Histogram after = DistanceChart.histogram(model, plan, recompute);
 * ChartFiles.write(DistanceChart.chart(after, false, "resnet"), Path.of("distances.svg"));
 * }</pre>
 */
public final class DistanceChart {
  private static final double MIB = 1 << 20;
  /** Colour of the edges the plan keeps. */
  static final Color KEPT = new Color(0xa6, 0xbd, 0xd7);
  /** Width of the chart in pixels (two fit side by side on a page). */
  static final int WIDTH = 700;
  /** Height of the chart in pixels. */
  static final int HEIGHT = 440;

  static {
    ChartFiles.headless();
  }

  private DistanceChart() {}

  /**
   * The histogram's data, one entry per bucket from the shortest distance to the longest.
   *
   * @param labels     bucket labels ({@code "0"}, {@code "1"}, {@code "2-3"}, {@code "4-7"}, ...)
   * @param edges      edges per bucket: [kept, swapped, recomputed]
   * @param bytes      bytes read over those edges, per bucket: [kept, swapped, recomputed]
   */
  public record Histogram(List<String> labels, List<long[]> edges, List<long[]> bytes) {
    /** Edges of one kind (0 kept, 1 swapped, 2 recomputed) summed over the buckets. */
    public long totalEdges(int kind) {
      return edges.stream().mapToLong(e -> e[kind]).sum();
    }
  }

  /**
   * Computes the histogram of {@code model} rewritten with {@code recompute} (null or empty: the
   * original graph), marking the edges {@code swap} reads through swap-ins.
   */
  public static Histogram histogram(DataflowGraph model, SwapPlan swap, RecomputePlan recompute) {
    DataflowGraph g = recompute == null || recompute.isEmpty() ? model
        : RecomputeApplier.apply(model, recompute);
    Set<String> swapped = new HashSet<>();
    if (swap != null) {
      for (SwapPlan.SwapOut so : swap.swapOuts()) {
        int producer = g.opOrThrow(so.producer()).id();
        for (SwapPlan.SwapIn si : so.swapIns()) {
          for (String c : si.consumers()) {
            swapped.add(key(producer, so.output(), g.opOrThrow(c).id()));
          }
        }
      }
    }
    String clonePrefix = RecomputePlan.cloneName("", "").replaceAll("/+$", "/");
    TreeMap<Integer, long[][]> buckets = new TreeMap<>();
    for (Liveness.Edge e : Liveness.distances(g, Levels.of(g))) {
      int k = e.distance() <= 0 ? -1 : 31 - Integer.numberOfLeadingZeros(e.distance());
      String key = key(e.tensor().op(), e.tensor().output(), e.consumer());
      int kind = swapped.contains(key) ? 1
          : g.op(e.tensor().op()).name().startsWith(clonePrefix) ? 2 : 0;
      long[][] cell = buckets.computeIfAbsent(k, x -> new long[2][3]);
      cell[0][kind]++;
      cell[1][kind] += g.tensor(e.tensor()).bytes();
    }
    List<String> labels = new ArrayList<>();
    List<long[]> edges = new ArrayList<>();
    List<long[]> bytes = new ArrayList<>();
    if (!buckets.isEmpty()) {
      // every bucket from the first to the last, empty ones too, so the x axis is a scale
      for (int k = buckets.firstKey(); k <= buckets.lastKey(); k++) {
        long[][] cell = buckets.getOrDefault(k, new long[2][3]);
        labels.add(label(k));
        edges.add(cell[0]);
        bytes.add(cell[1]);
      }
    }
    return new Histogram(List.copyOf(labels), List.copyOf(edges), List.copyOf(bytes));
  }

  /** Writes the histogram of edge counts ({@code .svg} or {@code .png}). */
  public static void write(Histogram h, String title, Path out) throws IOException {
    ChartFiles.checkTarget(out);
    ChartFiles.write(chart(h, false, title), out);
  }

  /**
   * The histogram as a stacked bar chart.
   *
   * @param byBytes y axis in MiB read over the edges instead of the number of edges
   */
  public static CategoryChart chart(Histogram h, boolean byBytes, String title) {
    CategoryChart c = new CategoryChartBuilder().width(WIDTH).height(HEIGHT)
        .title((byBytes ? "MiB read by consumers, by producer-consumer distance"
            : "Producer-consumer distances") + (title == null ? "" : ": " + title))
        .xAxisTitle("distance (levels between producer and consumer)")
        .yAxisTitle(byBytes ? "MiB read over the edges" : "edges").build();
    Charts.style(c.getStyler());
    c.getStyler().setStacked(true);
    c.getStyler().setOverlapped(false);
    c.getStyler().setLegendPosition(Styler.LegendPosition.InsideNE);
    c.getStyler().setYAxisMin(0.0);
    c.getStyler().setYAxisDecimalPattern(byBytes ? "#,##0.#" : "#,##0");
    List<String> labels = h.labels().isEmpty() ? List.of("0") : h.labels();
    String[] names = {"kept", "swapped", "recomputed"};
    Color[] colors = {KEPT, MemoryChart.SWAP_OUT, MemoryChart.RECOMPUTE};
    for (int kind = 0; kind < 3; kind++) {
      if (kind > 0 && h.totalEdges(kind) == 0) {
        continue;
      }
      List<Double> ys = new ArrayList<>();
      for (int b = 0; b < labels.size(); b++) {
        if (b >= h.edges().size()) {
          ys.add(0.0);
        } else {
          ys.add(byBytes ? h.bytes().get(b)[kind] / MIB : (double) h.edges().get(b)[kind]);
        }
      }
      CategorySeries s = c.addSeries(names[kind], labels, ys);
      s.setFillColor(colors[kind]);
    }
    return c;
  }

  private static String label(int k) {
    if (k < 0) {
      return "0";
    }
    long lo = 1L << k;
    long hi = (1L << (k + 1)) - 1;
    return lo == hi ? Long.toString(lo) : lo + "-" + hi;
  }

  private static String key(int op, int output, int consumer) {
    return op + ":" + output + ">" + consumer;
  }
}
