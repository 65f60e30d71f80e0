package dev.lms4j.viz;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.AxesChartStyler;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * Generic line charts (the benchmark's batch-vs-throughput and budget-vs-overhead curves, one
 * series per method), written as SVG or PNG by the output file's extension.
 *
 * <pre>{@code
 * Map<String, double[][]> series = new LinkedHashMap<>();
 * series.put("swap", new double[][] {{0.5, 0.33, 0.25}, {1.2, 1.6, 2.1}});   // {xs, ys}
 * series.put("auto", new double[][] {{0.5, 0.33, 0.25}, {1.1, 1.3, 1.8}});
 * Charts.lines("Step time under a budget", "budget / peak", "step time ratio", series,
 *     Path.of("docs/bench/overhead.svg"));
 * Charts.lines("Throughput", "batch", "samples/s", series,
 *     Charts.LineOptions.defaults().logX(true), Path.of("throughput.png"));
 * }</pre>
 *
 * Each series is {@code double[2][n]}: row 0 the x values, row 1 the y values. Points are drawn
 * in ascending x; points with a NaN or infinite coordinate (a method without a result there) are
 * left out, and so are points at or below zero on a logarithmic axis. Series are drawn in the
 * map's iteration order (use a {@link java.util.LinkedHashMap} for a stable legend).
 */
public final class Charts {
  /** Default width of a chart in pixels. */
  public static final int WIDTH = 1000;
  /** Default height of a chart in pixels. */
  public static final int HEIGHT = 560;

  /** Opaque series colours (the "tab10" palette), so every series has one exact colour. */
  static final Color[] PALETTE = {new Color(0x1f77b4), new Color(0xff7f0e),
      new Color(0x2ca02c), new Color(0xd62728), new Color(0x9467bd), new Color(0x8c564b),
      new Color(0xe377c2), new Color(0x7f7f7f), new Color(0xbcbd22), new Color(0x17becf)};

  static {
    ChartFiles.headless();
  }

  private Charts() {}

  /**
   * Options of a line chart.
   *
   * @param logX    logarithmic x axis
   * @param logY    logarithmic y axis
   * @param markers a marker at each point
   * @param width   width in pixels
   * @param height  height in pixels
   */
  public record LineOptions(boolean logX, boolean logY, boolean markers, int width, int height) {
    public LineOptions {
      if (width < 100 || height < 100) {
        throw new IllegalArgumentException("a chart needs at least 100 x 100 pixels");
      }
    }

    /** Linear axes, markers, {@link #WIDTH} x {@link #HEIGHT}. */
    public static LineOptions defaults() {
      return new LineOptions(false, false, true, WIDTH, HEIGHT);
    }

    /** These options with a logarithmic (or linear) x axis. */
    public LineOptions logX(boolean on) {
      return new LineOptions(on, logY, markers, width, height);
    }

    /** These options with a logarithmic (or linear) y axis. */
    public LineOptions logY(boolean on) {
      return new LineOptions(logX, on, markers, width, height);
    }

    /** These options with or without point markers. */
    public LineOptions markers(boolean on) {
      return new LineOptions(logX, logY, on, width, height);
    }

    /** These options with another size. */
    public LineOptions size(int w, int h) {
      return new LineOptions(logX, logY, markers, w, h);
    }
  }

  /** {@link #lines(String, String, String, Map, LineOptions, Path)} with the default options. */
  public static void lines(String title, String xLabel, String yLabel,
      Map<String, double[][]> seriesXY, Path out) throws IOException {
    lines(title, xLabel, yLabel, seriesXY, LineOptions.defaults(), out);
  }

  /**
   * Draws one line per series and writes it to {@code out} ({@code .svg} or {@code .png}).
   *
   * @throws IllegalArgumentException on a bad file name or directory, a series that is not
   *                                  {@code {xs, ys}} of equal lengths, or nothing to draw
   */
  public static void lines(String title, String xLabel, String yLabel,
      Map<String, double[][]> seriesXY, LineOptions options, Path out) throws IOException {
    ChartFiles.checkTarget(out);
    ChartFiles.write(linesChart(title, xLabel, yLabel, seriesXY, options), out);
  }

  /** The chart {@link #lines} writes, for callers that place it themselves (e.g. in HTML). */
  public static XYChart linesChart(String title, String xLabel, String yLabel,
      Map<String, double[][]> seriesXY, LineOptions options) {
    if (seriesXY == null || seriesXY.isEmpty()) {
      throw new IllegalArgumentException("no series to plot");
    }
    XYChart chart = new XYChartBuilder().width(options.width()).height(options.height())
        .title(title).xAxisTitle(xLabel).yAxisTitle(yLabel).build();
    style(chart.getStyler());
    chart.getStyler().setXAxisLogarithmic(options.logX()).setYAxisLogarithmic(options.logY());
    chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideE);
    int drawn = 0;
    for (Map.Entry<String, double[][]> e : seriesXY.entrySet()) {
      double[][] pts = points(e.getKey(), e.getValue(), options);
      if (pts[0].length == 0) {
        continue;
      }
      XYSeries s = chart.addSeries(e.getKey(), pts[0], pts[1]);
      s.setXYSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Line);
      s.setLineStyle(new BasicStroke(2f));
      s.setLineColor(PALETTE[drawn % PALETTE.length]);
      s.setMarkerColor(PALETTE[drawn % PALETTE.length]);
      if (!options.markers()) {
        s.setMarker(SeriesMarkers.NONE);
      }
      drawn++;
    }
    if (drawn == 0) {
      throw new IllegalArgumentException("no series has a point that can be drawn (NaN, "
          + "infinite, or not positive on a log axis)");
    }
    return chart;
  }

  /** Validates one series and returns its drawable points sorted by x. */
  private static double[][] points(String name, double[][] xy, LineOptions o) {
    if (xy == null || xy.length != 2 || xy[0] == null || xy[1] == null
        || xy[0].length != xy[1].length) {
      throw new IllegalArgumentException("series '" + name + "' must be {xs, ys} with as many "
          + "x values as y values");
    }
    Integer[] idx = new Integer[xy[0].length];
    int k = 0;
    for (int i = 0; i < xy[0].length; i++) {
      double x = xy[0][i];
      double y = xy[1][i];
      if (!Double.isFinite(x) || !Double.isFinite(y) || (o.logX() && x <= 0)
          || (o.logY() && y <= 0)) {
        continue;
      }
      idx[k++] = i;
    }
    Integer[] keep = Arrays.copyOf(idx, k);
    Arrays.sort(keep, Comparator.comparingDouble(i -> xy[0][i]));
    double[] xs = new double[k];
    double[] ys = new double[k];
    for (int i = 0; i < k; i++) {
      xs[i] = xy[0][keep[i]];
      ys[i] = xy[1][keep[i]];
    }
    return new double[][] {xs, ys};
  }

  /** The look every lms4j chart shares: white background, light grid, DejaVu-sized fonts. */
  static void style(AxesChartStyler st) {
    st.setChartBackgroundColor(Color.WHITE);
    st.setPlotBackgroundColor(Color.WHITE);
    st.setPlotBorderColor(new Color(0x99, 0x99, 0x99));
    st.setPlotGridLinesColor(new Color(0xe3, 0xe3, 0xe3));
    st.setLegendBorderColor(new Color(0xcc, 0xcc, 0xcc));
    st.setChartTitleBoxVisible(false);
    st.setChartTitleFont(new Font(Font.SANS_SERIF, Font.BOLD, 16));
    st.setAxisTitleFont(new Font(Font.SANS_SERIF, Font.PLAIN, 13));
    st.setAxisTickLabelsFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
    st.setLegendFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
    st.setChartPadding(12);
    st.setAntiAlias(true);
  }
}
