package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.models.ModelZoo;
import dev.lms4j.viz.MemoryTimeline;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code --plot} on analyze, run and train, and {@code analyze --html}. */
class PlotCliTest {
  /** The measured-peak line's colour in the memory plot. */
  private static final int MEASURED_GREEN = 0x2ca02c;
  /** The budget line's colour. */
  private static final int BUDGET_RED = 0xd62728;

  @TempDir Path dir;
  private String out;
  private String err;

  private int run(String... args) {
    CliRun.Result r = CliRun.exec(args);
    out = r.out();
    err = r.err();
    return r.code();
  }

  @Test
  void analyzeWritesThePlotAndOnePageWithThePlan() throws Exception {
    Path svg = dir.resolve("memory.svg");
    Path html = dir.resolve("plan.html");
    Path report = dir.resolve("r.json");
    assertThat(run("analyze", "--model", "mlp", "--batch", "2048", "--budget", "100MiB",
        "--plot", svg.toString(), "--html", html.toString(), "--report", report.toString()))
        .as(err).isZero();
    assertThat(out).contains("Plot: " + svg).contains("Page: " + html);
    assertThat(Files.readString(svg)).contains("<svg").contains("viewBox=\"0 0 1200 560\"");
    JsonNode r = new ObjectMapper().readTree(report.toFile());
    String page = Files.readString(html);
    // the page's table: one row per swapped tensor and per recomputed op of the report's plan
    int swaps = r.get("plan").get("swap_outs").asInt();
    int recomputed = r.get("plan").get("recomputed_ops").asInt();
    assertThat(swaps).isPositive();
    assertThat(count(page, "<tr data-index=")).isEqualTo(swaps + recomputed);
    assertThat(count(page, "class=\"swap\"")).isEqualTo(swaps);
    // the report's numbers, the plots inline, nothing fetched
    assertThat(page).contains("<code>predicted_peak_bytes.after</code></td><td>"
        + r.get("predicted_peak_bytes").get("after").asLong() + " (")
        .contains("<code>plan.parameters.planner</code></td><td>"
            + r.get("plan").get("parameters").get("planner").asText());
    assertThat(count(page, "<svg class=\"chart\"")).isEqualTo(3);
    assertThat(page).doesNotContainPattern("(src|href)\\s*=\\s*\"(https?:)?//");
  }

  @Test
  void pngByExtensionAndAPlotEvenWhenNothingFits() throws Exception {
    Path png = dir.resolve("memory.png");
    // 1 MiB cannot hold the weights: exit 1, and the plot shows the original graph's memory
    // against that budget
    assertThat(run("analyze", "--model", "mlp", "--budget", "1MiB", "--plot", png.toString()))
        .isEqualTo(1);
    BufferedImage img = ImageIO.read(png.toFile());
    assertThat(img.getWidth()).isEqualTo(1200);
    assertThat(pixels(img, BUDGET_RED)).isGreaterThan(100);
    assertThat(pixels(img, MEASURED_GREEN)).isZero();
  }

  @Test
  void badPlotOrPageFilesAreBadInputAndNothingIsWritten() {
    Path report = dir.resolve("r.json");
    String[][] bad = {
        {"--plot", dir.resolve("memory.txt").toString()},
        {"--plot", dir.resolve("none/memory.svg").toString()},
        {"--plot", dir.toString()},
        {"--html", dir.resolve("plan.svg").toString()},
        {"--html", dir.resolve("none/plan.html").toString()}};
    for (String[] b : bad) {
      assertThat(run("analyze", "--model", "mlp", "--budget", "100MiB", "--report",
          report.toString(), b[0], b[1])).as(String.join(" ", b)).isEqualTo(2);
      assertThat(err).startsWith("lms4j: cannot ");
    }
    assertThat(run("run", "--model", "mlp", "--steps", "1", "--plot", "memory.pdf"))
        .isEqualTo(2);
    assertThat(err).contains(".svg or .png");
    assertThat(run("train", "--model", "mlp", "--steps", "1", "--plot", "memory.jpg"))
        .isEqualTo(2);
    assertThat(err).contains(".svg or .png");
    assertThat(dir.toFile().list()).isEmpty();
    assertThat(Path.of("memory.pdf")).doesNotExist();
    assertThat(Path.of("memory.jpg")).doesNotExist();
  }

  @Test
  void runDrawsTheMeasuredPeak() throws Exception {
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(256,
        Map.of("layers", "4", "width", "512"));
    Path pb = dir.resolve("mlp.pb");
    Path manifest = dir.resolve("mlp.json");
    tg.write(pb, manifest);
    Path png = dir.resolve("run.png");
    assertThat(run("run", "--graph", pb.toString(), "--manifest", manifest.toString(),
        "--steps", "2", "--lms", "off", "--plot", png.toString())).as(err).isZero();
    assertThat(out).contains("measured peak").contains("Plot: " + png);
    BufferedImage img = ImageIO.read(png.toFile());
    assertThat(pixels(img, MEASURED_GREEN)).as("measured peak line").isGreaterThan(100);
  }

  @Test
  void thePlottedPeakIsThePlannersPredictionInEveryMode() throws Exception {
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(2048, Map.of());
    String[][] cases = {{"tflms"}, {"remat"}, {"auto"}, {"sqrt"}, {"off"},
        {"remat", "--remat-mode", "standard"}};
    for (String[] c : cases) {
      String mode = String.join(" ", c);
      // recomputation alone needs more room than swapping on this MLP
      String budget = c[0].equals("remat") || c[0].equals("sqrt") ? "150MiB" : "100MiB";
      String[] args = new String[c.length + 3];
      args[0] = "--lms";
      System.arraycopy(c, 0, args, 1, c.length);
      args[c.length + 1] = "--budget";
      args[c.length + 2] = budget;
      LmsOptions o = CommandLine.populateCommand(new LmsOptions(), args);
      Pipeline.Outcome oc = Pipeline.execute("mlp", tg, o, 0,
          new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
      assertThat(oc.exitCode()).as(mode).isZero();
      LmsResult lms = Plots.planOf(oc, o);
      MemoryTimeline t = Plots.timeline(tg, lms, o);
      assertThat(t.before().peakBytes()).as(mode).isEqualTo(lms.predictedPeakBefore());
      assertThat(t.after().peakBytes()).as(mode).isEqualTo(lms.predictedPeakAfter());
      assertThat(t.rewritten()).as(mode).isEqualTo(!c[0].equals("off"))
          .isEqualTo(lms.rewritten());
      assertThat(t.swapOuts().length).as(mode).isEqualTo(lms.plan().swapOuts().size());
      assertThat(t.recomputes().length).as(mode).isEqualTo(lms.recompute().clonedOps());
    }
  }

  private static int pixels(BufferedImage img, int rgb) {
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

  private static int count(String s, String needle) {
    int n = 0;
    for (int i = s.indexOf(needle); i >= 0; i = s.indexOf(needle, i + 1)) {
      n++;
    }
    return n;
  }
}
