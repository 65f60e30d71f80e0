package dev.lms4j.viz;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Locale;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.Marker;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * The memory plot: simulated device memory over one training step's schedule before and after
 * LMS, the budget (and the planner's target, {@code budget * memRatio}), the measured peak when
 * a run measured one, and markers where swap-outs, swap-ins and recomputed ops run.
 *
 * <pre>{@code
 * MemoryTimeline t = MemoryTimeline.of(result.model(), result.plan(), result.recompute());
 * MemoryChart.write(t, MemoryChart.Marks.of("resnet", budget).memRatio(0.8), Path.of("m.svg"));
 * }</pre>
 */
public final class MemoryChart {
  /** Colour of the curve before LMS. */
  static final Color BEFORE = new Color(0x8c, 0x8c, 0x8c);
  /** Colour of the curve after LMS. */
  static final Color AFTER = new Color(0x1f, 0x77, 0xb4);
  static final Color BUDGET = new Color(0xd6, 0x27, 0x28);
  static final Color TARGET = new Color(0xff, 0x7f, 0x0e);
  static final Color MEASURED = new Color(0x2c, 0xa0, 0x2c);
  static final Color SWAP_OUT = new Color(0x94, 0x67, 0xbd);
  static final Color SWAP_IN = new Color(0x17, 0xbe, 0xcf);
  static final Color RECOMPUTE = new Color(0x8c, 0x56, 0x4b);

  private static final double MIB = 1 << 20;
  /** Wider than other charts: the legend sits on the right. */
  static final int WIDTH = 1200;

  static {
    ChartFiles.headless();
  }

  private MemoryChart() {}

  /**
   * What the plot shows besides the curves.
   *
   * @param title             the chart's title (usually the model's name)
   * @param budgetBytes       the budget; 0 or less: no budget line
   * @param memRatio          the planner's share of the budget; a line is drawn when below 1
   * @param measuredPeakBytes a measured peak; -1: none
   */
  public record Marks(String title, long budgetBytes, double memRatio, long measuredPeakBytes) {
    /** A title and a budget, no planner target, no measurement. */
    public static Marks of(String title, long budgetBytes) {
      return new Marks(title, budgetBytes, 1.0, -1);
    }

    /** These marks with the planner's memory ratio. */
    public Marks memRatio(double r) {
      return new Marks(title, budgetBytes, r, measuredPeakBytes);
    }

    /** These marks with a measured peak (-1: none). */
    public Marks measuredPeak(long bytes) {
      return new Marks(title, budgetBytes, memRatio, bytes);
    }
  }

  /** Draws the plot and writes it to {@code out} ({@code .svg} or {@code .png}). */
  public static void write(MemoryTimeline t, Marks marks, Path out) throws IOException {
    ChartFiles.checkTarget(out);
    ChartFiles.write(chart(t, marks), out);
  }

  /** The plot as an XChart chart. */
  public static XYChart chart(MemoryTimeline t, Marks m) {
    long most = Math.max(Math.max(t.before().peakBytes(), t.after().peakBytes()),
        Math.max(m.budgetBytes(), m.measuredPeakBytes()));
    // MiB, or KiB for small (synthetic) graphs
    double unit = most >= 2 * MIB ? MIB : 1024;
    XYChart c = new XYChartBuilder().width(WIDTH).height(Charts.HEIGHT)
        .title("Predicted device memory over one step" + (m.title() == null ? ""
            : ": " + m.title()))
        .xAxisTitle("ops run, in schedule order")
        .yAxisTitle("device memory (" + (unit == MIB ? "MiB" : "KiB") + ")").build();
    Charts.style(c.getStyler());
    c.getStyler().setLegendPosition(Styler.LegendPosition.OutsideE);
    c.getStyler().setYAxisMin(0.0).setXAxisMin(0.0).setYAxisDecimalPattern("#,##0")
        .setXAxisDecimalPattern("#,##0");
    int len = Math.max(t.before().timeline().length, t.after().timeline().length);
    if (t.rewritten()) {
      curve(c, "before LMS: peak " + size(t.before().peakBytes()), t.before().timeline(), unit,
          BEFORE, 1.6f);
      curve(c, "after LMS: peak " + size(t.after().peakBytes()), t.after().timeline(), unit,
          AFTER, 2.0f);
    } else {
      curve(c, "no rewrite: peak " + size(t.before().peakBytes()), t.before().timeline(), unit,
          AFTER, 2.0f);
    }
    if (m.budgetBytes() > 0) {
      level(c, "budget " + size(m.budgetBytes()), m.budgetBytes() / unit, len, BUDGET,
          dashed(2f, 8f, 5f));
      if (m.memRatio() > 0 && m.memRatio() < 1) {
        long target = (long) (m.budgetBytes() * m.memRatio());
        level(c, String.format(Locale.ROOT, "planner target %s (%.0f%%)", size(target),
            100 * m.memRatio()), target / unit, len, TARGET, dashed(1.5f, 4f, 4f));
      }
    }
    if (m.measuredPeakBytes() >= 0) {
      level(c, "measured peak " + size(m.measuredPeakBytes()), m.measuredPeakBytes() / unit, len,
          MEASURED, dashed(2f, 12f, 4f, 2f, 4f));
    }
    events(c, "swap-out", t.swapOuts(), t, unit, SWAP_OUT, SeriesMarkers.TRIANGLE_DOWN);
    events(c, "swap-in", t.swapIns(), t, unit, SWAP_IN, SeriesMarkers.TRIANGLE_UP);
    events(c, "recompute", t.recomputes(), t, unit, RECOMPUTE, SeriesMarkers.DIAMOND);
    c.getStyler().setYAxisMax(Math.max(1.0, Math.ceil(most * 1.08 / unit)));
    c.getStyler().setXAxisMax(Math.max(1, len) - 0.5);
    return c;
  }

  private static void curve(XYChart c, String name, long[] timeline, double unit, Color color,
      float width) {
    double[] x = new double[timeline.length];
    double[] y = new double[timeline.length];
    for (int i = 0; i < timeline.length; i++) {
      x[i] = i;
      y[i] = timeline[i] / unit;
    }
    if (x.length == 0) {
      x = new double[] {0};
      y = new double[] {0};
    }
    XYSeries s = c.addSeries(name, x, y);
    s.setXYSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Step);
    s.setMarker(SeriesMarkers.NONE);
    s.setLineColor(color);
    s.setLineStyle(new BasicStroke(width));
  }

  private static void level(XYChart c, String name, double y, int len, Color color,
      BasicStroke stroke) {
    // half a slot past both ends: the x values of the chart are then not all equally spaced,
    // which makes XChart choose round tick steps (with equally spaced values it labels every
    // k-th value instead: 0, 29, 58, ...)
    XYSeries s = c.addSeries(name, new double[] {-0.5, Math.max(1, len) - 0.5},
        new double[] {y, y});
    s.setXYSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Line);
    s.setMarker(SeriesMarkers.NONE);
    s.setLineColor(color);
    s.setLineStyle(stroke);
  }

  private static void events(XYChart c, String name, int[] pos, MemoryTimeline t, double unit,
      Color color, Marker marker) {
    if (pos.length == 0) {
      return;
    }
    double[] x = new double[pos.length];
    double[] y = new double[pos.length];
    for (int i = 0; i < pos.length; i++) {
      x[i] = pos[i];
      y[i] = t.at(pos[i]) / unit;
    }
    XYSeries s = c.addSeries(name + " (" + pos.length + ")", x, y);
    s.setXYSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Scatter);
    s.setMarker(marker);
    s.setMarkerColor(color);
  }

  private static BasicStroke dashed(float width, float... dash) {
    return new BasicStroke(width, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, dash, 0f);
  }

  static String size(long bytes) {
    return bytes < 2 * MIB ? String.format(Locale.ROOT, "%.1f KiB", bytes / 1024.0)
        : String.format(Locale.ROOT, "%.1f MiB", bytes / MIB);
  }
}
