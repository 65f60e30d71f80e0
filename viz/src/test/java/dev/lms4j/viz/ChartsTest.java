package dev.lms4j.viz;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.awt.Color;
import java.awt.image.BufferedImage;
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.imageio.ImageIO;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYSeries;

class ChartsTest {
  @TempDir Path dir;

  private static Map<String, double[][]> curves() {
    Map<String, double[][]> m = new LinkedHashMap<>();
    // x out of order and a NaN (a method without a result at that budget)
    m.put("swap", new double[][] {{0.5, 0.25, 0.33, 0.2}, {1.2, 2.1, 1.6, Double.NaN}});
    m.put("auto", new double[][] {{0.5, 0.33, 0.25, 0.2}, {1.1, 1.3, 1.8, 2.4}});
    return m;
  }

  @Test
  void linesWritesSvgThatIsWellFormedXml() throws Exception {
    Path out = dir.resolve("overhead.svg");
    Charts.lines("Step time", "budget / peak", "step time ratio", curves(), out);
    String svg = Files.readString(out);
    assertThat(svg).contains("<svg").contains("viewBox=\"0 0 1000 560\"");
    // parses as XML (without fetching the DTD)
    DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
    f.setFeature("http://apache.org/xml/features/nonvalidating/load-external-dtd", false);
    assertThat(f.newDocumentBuilder().parse(out.toFile()).getDocumentElement().getNodeName())
        .isEqualTo("svg");
  }

  @Test
  void linesDrawEachSeriesInItsColourSortedByXWithoutNaN() throws Exception {
    XYChart c = Charts.linesChart("Step time", "budget / peak", "ratio", curves(),
        Charts.LineOptions.defaults());
    XYSeries swap = c.getSeriesMap().get("swap");
    assertThat(swap.getXData()).containsExactly(0.25, 0.33, 0.5);
    assertThat(swap.getYData()).containsExactly(2.1, 1.6, 1.2);
    assertThat(c.getSeriesMap().get("auto").getXData()).hasSize(4);

    // colours are assigned when the chart is painted
    BufferedImage img = ImageIO.read(new ByteArrayInputStream(ChartFiles.png(c)));
    assertThat(swap.getLineColor()).isNotEqualTo(c.getSeriesMap().get("auto").getLineColor());
    assertThat(img.getWidth()).isEqualTo(Charts.WIDTH);
    assertThat(img.getHeight()).isEqualTo(Charts.HEIGHT);
    assertThat(count(img, swap.getLineColor())).isGreaterThan(300);
    assertThat(count(img, c.getSeriesMap().get("auto").getLineColor())).isGreaterThan(300);
  }

  @Test
  void pngByExtension() throws Exception {
    Path out = dir.resolve("throughput.PNG");
    Charts.lines("Throughput", "batch", "samples/s", curves(),
        Charts.LineOptions.defaults().logX(true).logY(true).markers(false), out);
    byte[] b = Files.readAllBytes(out);
    assertThat(b).startsWith(0x89, 'P', 'N', 'G');
    assertThat(dir.resolve("throughput.PNG.tmp")).doesNotExist();
  }

  @Test
  void logAxesDropPointsTheyCannotShow() {
    Map<String, double[][]> m = Map.of("m", new double[][] {{0, 1, 2, 4}, {5, -1, 3, 2}});
    XYChart c = Charts.linesChart("t", "x", "y", m,
        Charts.LineOptions.defaults().logX(true).logY(true));
    assertThat(c.getStyler().isXAxisLogarithmic()).isTrue();
    assertThat(c.getStyler().isYAxisLogarithmic()).isTrue();
    assertThat(c.getSeriesMap().get("m").getXData()).containsExactly(2.0, 4.0);
  }

  @Test
  void badInputIsRefusedAndNothingIsWritten() {
    Path svg = dir.resolve("a.svg");
    assertThatThrownBy(() -> Charts.lines("t", "x", "y",
        Map.of("m", new double[][] {{1, 2}, {1}}), svg))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'m'");
    assertThatThrownBy(() -> Charts.lines("t", "x", "y",
        Map.of("m", new double[][] {{1, 2, 3}}), svg))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Charts.lines("t", "x", "y", Map.of(), svg))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no series");
    assertThatThrownBy(() -> Charts.lines("t", "x", "y",
        Map.of("m", new double[][] {{Double.NaN}, {1}}), svg))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(svg).doesNotExist();
    Path txt = dir.resolve("a.txt");
    assertThatThrownBy(() -> Charts.lines("t", "x", "y", curves(), txt))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(".svg or .png");
    assertThat(txt).doesNotExist();
    Path missing = dir.resolve("no/such/dir/a.svg");
    assertThatThrownBy(() -> Charts.lines("t", "x", "y", curves(), missing))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no such directory");
    assertThatThrownBy(() -> Charts.lines("t", "x", "y", curves(), dir))
        .isInstanceOf(IllegalArgumentException.class);
  }

  /** Pixels of exactly this colour. */
  static int count(BufferedImage img, Color c) {
    int rgb = c.getRGB() & 0xffffff;
    int n = 0;
    for (int y = 0; y < img.getHeight(); y++) {
      for (int x = 0; x < img.getWidth(); x++) {
        if ((img.getRGB(x, y) & 0xffffff) == rgb) {
          n++;
        }
      }
    }
    return n;
  }
}
