package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code bench --suite native} end to end at {@link NativeSwapBench.Config#SMALL} (an 8 MiB
 * tensor, an MLP in budgeted worker JVMs): every path's bandwidth row, the figures derived from
 * the repetitions, the step-time rows with LMS below the smallest budget without it (losses
 * bit-identical to the unbudgeted run), and the same numbers in native.md.
 */
class NativeSwapBenchTest {
  private static final List<String> PATHS = List.of("memcpy", "standard", "native",
      "native-async", "file-io", "standard-disk", "native-disk");
  private static final List<String> VARIANTS = List.of("standard", "native+overlap");

  @Test
  void smallRunWritesEveryPathAndEveryVariant(@TempDir Path dir) throws Exception {
    NativeSwapBench.Config c = NativeSwapBench.Config.SMALL;
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    ObjectNode root = NativeSwapBench.run(c, dir, new PrintStream(buf, true,
        StandardCharsets.UTF_8));
    String printed = buf.toString(StandardCharsets.UTF_8);
    // what was written is what was returned
    ObjectMapper om = new ObjectMapper();
    JsonNode json = om.readTree(dir.resolve("native.json").toFile());
    assertThat(json).isEqualTo(om.readTree(om.writeValueAsString(root)));
    assertThat(json.path("schema").asText()).isEqualTo("lms4j-bench/1");
    assertThat(json.path("native_library").asText()).isEqualTo("loaded");

    // bandwidth: one row per path in order, each figure the median of its repetitions
    JsonNode bw = json.path("bandwidth");
    assertThat(bw.path("tensor_bytes").asLong()).isEqualTo(8L << 20);
    assertThat(bw.path("reps").asInt()).isEqualTo(3);
    List<String> paths = new ArrayList<>();
    bw.path("paths").forEach(r -> paths.add(r.path("path").asText()));
    assertThat(paths).containsExactlyElementsOf(PATHS);
    double memcpyRt = 0;
    for (JsonNode r : bw.path("paths")) {
      String p = r.path("path").asText();
      double[] out = doubles(r.path("out_ms_each"));
      double[] rt = doubles(r.path("round_trip_ms_each"));
      assertThat(out).as(p).hasSize(3);
      assertThat(rt).as(p).hasSize(3);
      for (double v : out) {
        assertThat(v).as(p).isPositive().isFinite();
      }
      assertThat(r.path("out_ms").asDouble()).as(p).isEqualTo(median(out));
      assertThat(r.path("round_trip_ms").asDouble()).as(p).isEqualTo(median(rt));
      assertThat(r.path("out_gb_s").asDouble()).as(p)
          .isCloseTo((8L << 20) / median(out) / 1e6, within(1e-9));
      assertThat(r.path("round_trip_gb_s").asDouble()).as(p)
          .isCloseTo((8L << 20) / median(rt) / 1e6, within(1e-9));
      if (p.equals("memcpy")) {
        memcpyRt = r.path("round_trip_gb_s").asDouble();
        assertThat(r.path("round_trip_vs_memcpy").asDouble()).isEqualTo(1.0);
      }
    }
    assertThat(bw.path("memcpy_round_trip_gb_s").asDouble()).isEqualTo(memcpyRt);
    for (JsonNode r : bw.path("paths")) {
      assertThat(r.path("round_trip_vs_memcpy").asDouble()).isCloseTo(
          r.path("round_trip_gb_s").asDouble() / memcpyRt, within(1e-12));
    }
    // the bandwidth part leaves no swap directory behind
    assertThat(Path.of(bw.path("swap_dir").asText())).doesNotExist();

    // step times: the MLP at 50% of its smallest budget without LMS, standard and native
    JsonNode st = json.path("step_time");
    assertThat(st.path("model").asText()).isEqualTo("mlp");
    assertThat(st.path("batch").asInt()).isEqualTo(2048);
    long noLms = st.path("min_budget_no_lms_bytes").asLong();
    assertThat(noLms % (1L << 20)).isZero();
    // bisected between half and twice the unbudgeted peak (whole MiB)
    long peakMib = st.path("unbudgeted_peak_bytes").asLong() >> 20;
    assertThat(st.path("bisection_mib").asText()).isEqualTo(peakMib / 2 + ".." + (2 * peakMib
        + 1));
    assertThat(noLms >> 20).isGreaterThan(peakMib / 2).isLessThanOrEqualTo(2 * peakMib + 1);
    List<String> variants = new ArrayList<>();
    for (JsonNode r : st.path("results")) {
      String v = r.path("path").asText();
      variants.add(v);
      assertThat(r.path("fraction").asDouble()).isEqualTo(0.5);
      assertThat(r.path("budget_bytes").asLong()).isEqualTo((long) (noLms * 0.5));
      // LMS trains where the bisection found no-LMS does not (half its smallest budget),
      // swapping, to the unbudgeted run's losses
      assertThat(r.path("fits").asBoolean()).as(r.toString()).isTrue();
      assertThat(r.path("swap_outs").asInt()).as(v).isPositive();
      // a fixed op order (the small run leaves out standard+overlap, whose inter-op pool may
      // move the losses, docs/bench/native.md): the unbudgeted run's losses bit for bit
      assertThat(r.path("losses_identical_to_unbudgeted").asBoolean()).as(v).isTrue();
      // one LMS run per path against the first unbudgeted run
      assertThat(r.path("unbudgeted_ms_per_step").asDouble()).as(v)
          .isEqualTo(st.path("results").get(0).path("unbudgeted_ms_per_step").asDouble());
      assertThat(r.path("step_time_ratio").asDouble()).as(v).isCloseTo(
          r.path("ms_per_step").asDouble() / r.path("unbudgeted_ms_per_step").asDouble(),
          within(1e-12));
      assertThat(r.path("measured_peak_bytes").asLong()).as(v).isPositive();
    }
    assertThat(variants).containsExactlyElementsOf(VARIANTS);

    // native.md: a row per path and per variant, with the JSON's figures
    String md = Files.readString(dir.resolve("native.md"));
    for (JsonNode r : bw.path("paths")) {
      assertThat(md).contains(String.format(Locale.ROOT, "| %s | %.2f | %.1f | %.2f |",
          r.path("path").asText(), r.path("out_gb_s").asDouble(),
          r.path("round_trip_ms").asDouble(), r.path("round_trip_gb_s").asDouble()));
    }
    for (JsonNode r : st.path("results")) {
      assertThat(md).contains(String.format(Locale.ROOT, "| 50%% (%d MiB) | %s | yes | %.0f |",
          r.path("budget_bytes").asLong() >> 20, r.path("path").asText(),
          r.path("ms_per_step").asDouble()));
    }
    assertThat(md).contains("Smallest budget without LMS: " + (noLms >> 20) + " MiB");
    assertThat(printed).contains("Results: " + dir.resolve("native.json"));
  }

  private static double[] doubles(JsonNode a) {
    double[] d = new double[a.size()];
    for (int i = 0; i < d.length; i++) {
      d[i] = a.get(i).asDouble();
    }
    return d;
  }

  private static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }
}
