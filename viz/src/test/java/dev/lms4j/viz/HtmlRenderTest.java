package dev.lms4j.viz;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.awt.Color;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Renders the HTML report in headless Chromium (Debian's {@code chromium}, found on the PATH as
 * {@code .ci/run}'s {@code command -v chromium} finds it, or {@code -Dlms4j.chromium=PATH};
 * skipped when it is absent, which {@code .ci/check-skips} turns into a CI failure): the table sorts when its headings are clicked, and a screenshot shows the plots.
 * The screenshot is kept in {@code target/html-render/} for people to look at.
 */
class HtmlRenderTest {
  private static final Path CHROMIUM = findChromium();
  private static final Pattern ROW = Pattern.compile("<tr data-index=\"(\\d+)\" "
      + "data-bytes=\"(\\d+)\" class=\"[^\"]+\"><td>[^<]*</td><td data-sort=\"([^\"]*)\">");

  @TempDir static Path dir;
  private static Path page;
  private static List<Row> original;

  record Row(int index, long bytes, String tensor) {}

  @BeforeAll
  static void writePage() throws Exception {
    if (!Files.isExecutable(CHROMIUM)) {
      return; // each test reports itself skipped (surefire loses a class-level skip)
    }
    page = dir.resolve("plan.html");
    HtmlReport.write(HtmlReportTest.page("mlp-12"), page);
    original = rows(Files.readString(page));
    // the page lists rows in plan order, which is sorted neither by size nor by name: sorting
    // has to move them
    assertThat(original).hasSize(27);
    assertThat(original).isNotEqualTo(sorted(original, bySize().reversed()))
        .isNotEqualTo(sorted(original, bySize())).isNotEqualTo(sorted(original, byTensor()));
  }

  /** {@code -Dlms4j.chromium}, else the first executable {@code chromium} on the PATH. */
  static Path findChromium() {
    String set = System.getProperty("lms4j.chromium");
    if (set != null && !set.isBlank()) {
      return Path.of(set);
    }
    for (String d : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
      if (!d.isEmpty() && Files.isExecutable(Path.of(d, "chromium"))) {
        return Path.of(d, "chromium");
      }
    }
    return Path.of("chromium"); // not found: the tests skip and say so
  }

  @BeforeEach
  void needChromium() {
    assumeTrue(Files.isExecutable(CHROMIUM), "Chromium not found (" + CHROMIUM + " on the "
        + "PATH): skipping the rendering test (apt-get install chromium fonts-dejavu-core, or set "
        + "-Dlms4j.chromium=PATH)");
  }

  @Test
  void clickingTheSizeHeadingSortsBiggestFirstThenSmallestFirst() throws Exception {
    // one click: numbers start descending
    String dom = dumpDom("#sort=bytes:desc");
    assertThat(dom).contains("data-sorted=\"bytes:descending\"")
        .contains("data-key=\"bytes\" data-type=\"num\" tabindex=\"0\" aria-sort=\"descending\"");
    List<Row> desc = rows(dom);
    assertThat(desc).containsExactlyElementsOf(sorted(original, bySize().reversed()
        .thenComparingInt(Row::index)));
    // two clicks: ascending
    List<Row> asc = rows(dumpDom("#sort=bytes:asc"));
    assertThat(asc).containsExactlyElementsOf(sorted(original, bySize()
        .thenComparingInt(Row::index)));
  }

  @Test
  void clickingATextHeadingSortsByName() throws Exception {
    String dom = dumpDom("#sort=tensor:asc");
    assertThat(dom).contains("data-sorted=\"tensor:ascending\"");
    assertThat(rows(dom)).containsExactlyElementsOf(sorted(original, byTensor()));
    // without a request the rows stay in plan order
    assertThat(rows(dumpDom(""))).containsExactlyElementsOf(original);
  }

  @Test
  void screenshotShowsTheMemoryPlotAndTheHistograms() throws Exception {
    Path png = Files.createDirectories(Path.of("target", "html-render")).resolve("plan.png");
    Files.deleteIfExists(png);
    chromium("--screenshot=" + png.toAbsolutePath(), "--window-size=1400,2000",
        page.toUri().toString());
    BufferedImage img = ImageIO.read(png.toFile());
    assertThat(img.getWidth()).isEqualTo(1400);
    assertThat(img.getHeight()).isEqualTo(2000);
    // not blank: a good part of the page is neither the background nor white
    int background = new Color(0xf5, 0xf7, 0xf9).getRGB() & 0xffffff;
    long ink = 0;
    for (int y = 0; y < img.getHeight(); y++) {
      for (int x = 0; x < img.getWidth(); x++) {
        int p = img.getRGB(x, y) & 0xffffff;
        if (p != background && p != 0xffffff) {
          ink++;
        }
      }
    }
    assertThat(ink).as("non-background pixels").isGreaterThan(1400L * 2000 / 50);
    // the inline SVGs were drawn: the curves before and after LMS, the budget line, and the
    // histogram's kept, swapped and recomputed bars, each in its own colour
    assertThat(ChartsTest.count(img, MemoryChart.BEFORE)).as("grey curve before LMS")
        .isGreaterThan(200);
    assertThat(ChartsTest.count(img, MemoryChart.AFTER)).as("blue curve after LMS")
        .isGreaterThan(200);
    assertThat(ChartsTest.count(img, MemoryChart.BUDGET)).as("red budget line")
        .isGreaterThan(100);
    assertThat(ChartsTest.count(img, DistanceChart.KEPT)).as("kept bars").isGreaterThan(1000);
    assertThat(ChartsTest.count(img, MemoryChart.SWAP_OUT)).as("swapped bars and markers")
        .isGreaterThan(50);
    assertThat(ChartsTest.count(img, MemoryChart.RECOMPUTE)).as("recomputed bars and markers")
        .isGreaterThan(200);
  }

  private static String dumpDom(String fragment) throws Exception {
    return chromium("--dump-dom", page.toUri() + fragment);
  }

  /** Runs headless Chromium with a fresh profile and returns what it printed on stdout. */
  private static String chromium(String... args) throws IOException, InterruptedException {
    Path profile = Files.createTempDirectory(dir, "profile");
    Path out = Files.createTempFile(dir, "out", ".txt");
    Path err = Files.createTempFile(dir, "err", ".txt");
    List<String> cmd = new ArrayList<>(List.of(CHROMIUM.toString(), "--headless",
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--user-data-dir=" + profile));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile())
        .start();
    if (!p.waitFor(120, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError("chromium did not finish in 120 s: " + Files.readString(err));
    }
    assertThat(p.exitValue()).as("chromium exit code; stderr: %s", Files.readString(err))
        .isZero();
    return Files.readString(out);
  }

  /** The plan table's rows in document order. */
  private static List<Row> rows(String html) {
    List<Row> rows = new ArrayList<>();
    Matcher m = ROW.matcher(html);
    while (m.find()) {
      rows.add(new Row(Integer.parseInt(m.group(1)), Long.parseLong(m.group(2)), m.group(3)));
    }
    return rows;
  }

  private static List<Row> sorted(List<Row> rows, Comparator<Row> c) {
    List<Row> s = new ArrayList<>(rows);
    s.sort(c);
    return s;
  }

  private static Comparator<Row> bySize() {
    return Comparator.comparingLong(Row::bytes);
  }

  private static Comparator<Row> byTensor() {
    return Comparator.comparing((Row r) -> r.tensor().toLowerCase(Locale.ROOT))
        .thenComparingInt(Row::index);
  }
}
