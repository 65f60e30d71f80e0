package dev.lms4j.viz;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.report.Report;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HtmlReportTest {
  @TempDir Path dir;

  /** A page for the 12-layer chain planned at 50 MiB (7 swaps, 20 recomputed ops). */
  static String page(String modelName) throws Exception {
    Fixtures.Planned p = Fixtures.auto(Fixtures.mlp(12), 50 * Fixtures.MIB);
    Report r = new Report(modelName, 1024, p.budget(), "auto");
    r.graph(p.model().size(), 100, 12 * Fixtures.MIB);
    r.plan(p.swap().swapOuts().size(), p.swap().swapInCount(), p.swap().swapOutBytes(),
        p.recompute().clonedOps(), p.recompute().bytes(), 7, null);
    r.predicted(90 * Fixtures.MIB, p.predictedPeak());
    return HtmlReport.render(r.json(), p.model(), p.swap(), p.recompute(),
        MemoryChart.Marks.of(modelName, p.budget()).memRatio(0.8));
  }

  @Test
  void onePageWithThePlotsThePlanAndTheNumbers() throws Exception {
    String html = page("mlp <12>");
    // three inline plots: memory, distances before and as planned
    assertThat(count(html, "<svg class=\"chart\"")).isEqualTo(3);
    // one row per swapped tensor and per recomputed op
    assertThat(count(html, "<tr data-index=")).isEqualTo(7 + 20);
    assertThat(count(html, "class=\"swap\"")).isEqualTo(7);
    // a swapped tensor's row: its size, the trigger of its swap-in, and its consumer (a clone)
    assertThat(html).contains("<td data-sort=\"dense1/MatMul:0\">dense1/<wbr>MatMul:0</td>"
        + "<td>MatMul</td><td class=\"shape\">float32[768, 1024]</td>"
        + "<td class=\"num\" data-sort=\"3145728\">3.0 MiB</td>"
        + "<td class=\"num\" data-sort=\"1\">1</td>"
        + "<td data-sort=\"gradients/ReluGrad_2\"><div class=\"li\">gradients/<wbr>ReluGrad_2"
        + "</div></td><td data-sort=\"lms4j/recompute/g0/dense1/BiasAdd\"><div class=\"li\">"
        + "lms4j/<wbr>recompute/<wbr>g0/<wbr>dense1/<wbr>BiasAdd</div></td>");
    // the report's numbers, with sizes for people
    assertThat(html).contains("<code>plan.swap_outs</code></td><td>7</td>")
        .contains("<code>predicted_peak_bytes.after</code></td><td>40894464 (39.0 MiB)</td>")
        .contains("&quot;schema&quot; : &quot;lms4j-report/1&quot;");
    // escaped, and nothing from the network
    assertThat(html).contains("mlp &lt;12&gt;").doesNotContain("mlp <12>");
    assertThat(html).doesNotContainPattern("(src|href)\\s*=\\s*\"(https?:)?//")
        .doesNotContain("@import").doesNotContainPattern("url\\((?!#)");
    // ids are unique across the inline SVGs (clip paths would otherwise clip the wrong plot)
    List<String> ids = new ArrayList<>();
    Matcher m = Pattern.compile("\\bid=\"([^\"]+)\"").matcher(html);
    while (m.find()) {
      ids.add(m.group(1));
    }
    Set<String> unique = new HashSet<>(ids);
    assertThat(ids).hasSameSizeAs(unique).hasSizeGreaterThan(5);
    Matcher ref = Pattern.compile("url\\(#([^)]+)\\)").matcher(html);
    int refs = 0;
    while (ref.find()) {
      assertThat(unique).contains(ref.group(1));
      refs++;
    }
    assertThat(refs).isPositive();
  }

  @Test
  void aFailedPlanStillShowsTheOriginalMemoryAndTheError() throws Exception {
    Report r = new Report("mlp", 1024, 30 * Fixtures.MIB, "auto");
    r.error("No swap parameters fit a budget of 30 MiB");
    String html = HtmlReport.render(r.json(), Fixtures.mlp(4), null, null,
        MemoryChart.Marks.of("mlp", 30 * Fixtures.MIB));
    assertThat(html).contains("<p class=\"error\" id=\"error\"><strong>Error:</strong> No swap "
        + "parameters fit").contains("Nothing is swapped or recomputed.");
    assertThat(count(html, "<svg class=\"chart\"")).isEqualTo(2);
  }

  @Test
  void writeChecksTheTarget() throws Exception {
    String html = page("mlp");
    Path ok = dir.resolve("plan.html");
    HtmlReport.write(html, ok);
    assertThat(Files.readString(ok)).isEqualTo(html);
    assertThatThrownBy(() -> HtmlReport.write(html, dir.resolve("plan.svg")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(".html");
    assertThatThrownBy(() -> HtmlReport.write(html, dir.resolve("none/plan.html")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no such directory");
    assertThat(dir.resolve("plan.svg")).doesNotExist();
  }

  static int count(String s, String needle) {
    int n = 0;
    for (int i = s.indexOf(needle); i >= 0; i = s.indexOf(needle, i + 1)) {
      n++;
    }
    return n;
  }
}
