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
 * {@code bench --suite checkpoint} end to end at {@link CheckpointBench.Config#SMALL} on 8 MiB of
 * variables: the three throughput rows (files, tf, dd) with medians and rates derived from their
 * repetitions, the ratios and target verdicts derived from the rows, the async-overhead block's
 * step counts and overheads, the same figures in checkpoint.md, and the scratch directory
 * removed.
 */
class CheckpointBenchTest {
  private static final long BYTES = 8L << 20;

  @Test
  void smallRunWritesThroughputAndAsyncOverhead(@TempDir Path dir) throws Exception {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    ObjectNode root = CheckpointBench.run(CheckpointBench.Config.SMALL, BYTES, dir,
        new PrintStream(buf, true, StandardCharsets.UTF_8));
    ObjectMapper om = new ObjectMapper();
    JsonNode json = om.readTree(dir.resolve("checkpoint.json").toFile());
    assertThat(json).isEqualTo(om.readTree(om.writeValueAsString(root)));
    assertThat(json.path("schema").asText()).isEqualTo("lms4j-bench/1");
    assertThat(json.path("suite").asText()).isEqualTo("checkpoint");
    // the small run leaves the machine's page cache alone
    assertThat(json.path("cold_cache").asBoolean()).isFalse();
    assertThat(Path.of(json.path("scratch_dir").asText())).doesNotExist();

    // one 8 MiB variable (2M floats), 2 repetitions per method
    assertThat(json.path("bytes").asLong()).isEqualTo(BYTES);
    assertThat(json.path("variables").asInt()).isEqualTo(1);
    assertThat(json.path("repetitions").asInt()).isEqualTo(2);
    List<String> methods = new ArrayList<>();
    for (JsonNode r : json.path("results")) {
      String m = r.path("method").asText();
      methods.add(m);
      assertThat(r.path("bytes").asLong()).as(m).isEqualTo(BYTES); // dd: one 8 MiB block
      double[] save = doubles(r.path("save_s"));
      double[] load = doubles(r.path("restore_s"));
      assertThat(save).as(m).hasSize(2);
      assertThat(load).as(m).hasSize(2);
      for (double t : save) {
        assertThat(t).as(m).isPositive().isFinite();
      }
      for (double t : load) {
        assertThat(t).as(m).isPositive().isFinite();
      }
      assertThat(r.path("save_s_median").asDouble()).as(m).isEqualTo((save[0] + save[1]) / 2);
      assertThat(r.path("restore_s_median").asDouble()).as(m).isEqualTo((load[0] + load[1]) / 2);
      assertThat(r.path("save_bytes_per_s").asDouble()).as(m)
          .isCloseTo(BYTES / r.path("save_s_median").asDouble(), within(1e-6));
      assertThat(r.path("restore_bytes_per_s").asDouble()).as(m)
          .isCloseTo(BYTES / r.path("restore_s_median").asDouble(), within(1e-6));
    }
    assertThat(methods).containsExactly("files", "tf", "dd");

    JsonNode res = json.path("results");
    JsonNode ratios = json.path("ratios");
    double filesVsTf = res.get(0).path("save_bytes_per_s").asDouble()
        / res.get(1).path("save_bytes_per_s").asDouble();
    double filesVsDd = res.get(0).path("save_bytes_per_s").asDouble()
        / res.get(2).path("save_bytes_per_s").asDouble();
    assertThat(ratios.path("files_vs_tf_save").asDouble()).isEqualTo(filesVsTf);
    assertThat(ratios.path("files_vs_dd_save").asDouble()).isEqualTo(filesVsDd);
    assertThat(ratios.path("files_vs_tf_restore").asDouble()).isEqualTo(
        res.get(0).path("restore_bytes_per_s").asDouble()
            / res.get(1).path("restore_bytes_per_s").asDouble());
    JsonNode targets = json.path("targets");
    assertThat(targets.path("files_vs_tf_save_met").asBoolean()).isEqualTo(filesVsTf >= 2.0);
    assertThat(targets.path("files_vs_dd_save_met").asBoolean()).isEqualTo(filesVsDd >= 0.7);

    // async overhead: a 2 x 256 x 256 float MLP, 2 rounds of 10 steps per block
    JsonNode a = json.path("async");
    assertThat(a.path("model_bytes").asLong()).isEqualTo(2L * 256 * 256 * 4);
    assertThat(a.path("layers").asInt()).isEqualTo(2);
    assertThat(a.path("width").asInt()).isEqualTo(256);
    assertThat(a.path("batch").asInt()).isEqualTo(64);
    assertThat(a.path("checkpoint_every").asInt()).isEqualTo(5);
    assertThat(a.path("steps_measured").asInt()).isEqualTo(20);
    double base = a.path("step_ms_mean_no_checkpoint").asDouble();
    double async = a.path("step_ms_mean_async").asDouble();
    double sync = a.path("step_ms_mean_sync").asDouble();
    assertThat(base).isPositive();
    assertThat(a.path("overhead_async").asDouble()).isCloseTo((async - base) / base,
        within(1e-12));
    assertThat(a.path("overhead_sync").asDouble()).isCloseTo((sync - base) / base,
        within(1e-12));
    assertThat(a.path("target_met").asBoolean())
        .isEqualTo(a.path("overhead_async").asDouble() <= 0.05);
    // a checkpoint at the first of every 5 steps of each async block: 2 rounds x 2 snapshots
    assertThat(a.path("snapshot_ms_median").asDouble()).isPositive();

    // checkpoint.md: the JSON's figures
    String md = Files.readString(dir.resolve("checkpoint.md"));
    for (JsonNode r : res) {
      assertThat(md).contains(String.format(Locale.ROOT, "| %s | %.2f | %.0f | %.2f | %.0f |",
          r.path("method").asText(), r.path("save_s_median").asDouble(),
          r.path("save_bytes_per_s").asDouble() / 1e6, r.path("restore_s_median").asDouble(),
          r.path("restore_bytes_per_s").asDouble() / 1e6));
    }
    assertThat(md).contains("1 float32 variables, 8.0 MiB; median of 2; reads from a warm page "
        + "cache.");
    assertThat(md).contains(String.format(Locale.ROOT, "files / tf: save %.2fx", filesVsTf));
    assertThat(md).contains(String.format(Locale.ROOT, "%.1f ms/step without checkpoints", base));
    assertThat(buf.toString(StandardCharsets.UTF_8))
        .contains("Results: " + dir.resolve("checkpoint.json"));
  }

  private static double[] doubles(JsonNode a) {
    double[] d = new double[a.size()];
    for (int i = 0; i < d.length; i++) {
      d[i] = a.get(i).asDouble();
    }
    return d;
  }
}
