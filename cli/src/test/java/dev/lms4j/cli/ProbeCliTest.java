package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train} probes its plan before training and its report holds the probe (each try with
 * its predicted and measured peaks); {@code --no-probe} trains the plan as it is, with the same
 * losses; {@code analyze} says it is static.
 */
class ProbeCliTest {
  @TempDir Path dir;

  /** mlp at batch 2048, width 256 under 33 MiB: auto rewrites it (ZooUnderBudgetTest). */
  @Test
  void theTrainReportHoldsThePlanThePredictionAndTheProbe() throws Exception {
    String[] common = {"train", "--model", "mlp", "--batch", "2048", "-o", "width=256",
        "--budget", "33MiB", "--lms", "auto", "--steps", "2"};
    Path probed = dir.resolve("probed.json");
    CliRun.Result r = CliRun.exec(concat(common, "--report", probed.toString()));
    assertThat(r.code()).as(r.out() + r.err()).isEqualTo(0);
    assertThat(r.out()).contains("Probe 1 (").contains("measured peak");
    JsonNode j = new ObjectMapper().readTree(probed.toFile());
    JsonNode p = j.get("probe");
    assertThat(p.get("verdict").asText()).isIn("accepted", "replanned");
    assertThat(p.get("tries").asInt()).isEqualTo(p.get("attempts").size()).isPositive();
    assertThat(p.get("replans").asInt()).isEqualTo(p.get("tries").asInt() - 1);
    JsonNode last = p.get("attempts").get(p.get("attempts").size() - 1);
    assertThat(last.get("fits").asBoolean()).isTrue();
    assertThat(last.get("measured_peak_bytes").asLong()).isPositive()
        .isLessThanOrEqualTo(33L << 20);
    // the probed plan is the one trained and reported
    assertThat(last.get("predicted_peak_bytes").asLong())
        .isEqualTo(j.get("predicted_peak_bytes").get("after").asLong());
    assertThat(j.get("plan").get("parameters").get("lms_needed").asBoolean()).isTrue();
    assertThat(j.get("measured").get("fits").asBoolean()).isTrue();
    // no --mem-ratio: the probe plans at its default (0.95) first; a ratio given is kept
    assertThat(p.get("attempts").get(0).get("mem_ratio").asDouble())
        .isEqualTo(dev.lms4j.tf.run.Probe.PROBED_MEM_RATIO);
    Path given = dir.resolve("given.json");
    r = CliRun.exec(concat(common, "--mem-ratio", "0.8", "--report", given.toString()));
    assertThat(r.code()).as(r.out() + r.err()).isEqualTo(0);
    assertThat(new ObjectMapper().readTree(given.toFile()).get("probe").get("attempts").get(0)
        .get("mem_ratio").asDouble()).isEqualTo(0.8);

    Path trusted = dir.resolve("trusted.json");
    r = CliRun.exec(concat(common, "--no-probe", "--report", trusted.toString()));
    assertThat(r.code()).as(r.out() + r.err()).isEqualTo(0);
    JsonNode t = new ObjectMapper().readTree(trusted.toFile());
    assertThat(t.has("probe")).isFalse();
    assertThat(t.get("measured").get("steps").findValuesAsText("loss"))
        .isEqualTo(j.get("measured").get("steps").findValuesAsText("loss"));
  }

  /**
   * An exported graph whose embedding table (48.8 MiB) TensorFlow's allocator gives a 64 MiB
   * region when init creates it first: {@code run} at 62 MiB has init create it last, prints
   * so, reports it ({@code init_order}), and the probe and the steps run.
   */
  @Test
  void runReportsTheInitOrderItChose() throws Exception {
    dev.lms4j.tf.TrainingGraph tg = dev.lms4j.train.corpus.Corpus.Family.EMBEDDING_SPARSE
        .build(dev.lms4j.train.corpus.Corpus.Size.BENCH, 42);
    Path pb = dir.resolve("emb.pb");
    java.nio.file.Files.write(pb, tg.graphDef().toByteArray());
    Path mf = dir.resolve("emb.json");
    tg.manifest().write(mf);
    Path report = dir.resolve("emb-report.json");
    CliRun.Result r = CliRun.exec("run", "--graph", pb.toString(), "--manifest", mf.toString(),
        "--budget", "62MiB", "--lms", "auto", "--steps", "2", "--report", report.toString());
    assertThat(r.code()).as(r.out() + r.err()).isEqualTo(0);
    assertThat(r.out()).contains("Init order: table created last");
    JsonNode j = new ObjectMapper().readTree(report.toFile());
    JsonNode order = j.get("init_order");
    assertThat(order.get("created_last").get(0).asText()).isEqualTo("table");
    assertThat(order.get("allocator_need_after_bytes").asLong())
        .isLessThan(order.get("allocator_need_before_bytes").asLong())
        .isLessThanOrEqualTo(62L << 20);
    assertThat(j.get("measured").get("fits").asBoolean()).isTrue();
  }

  @Test
  void analyzeSaysItIsStatic() {
    CliRun.Result r = CliRun.exec("analyze", "--help");
    assertThat(r.out()).contains("no probe runs");
    assertThat(CliRun.exec("train", "--help").out()).contains("--no-probe");
    assertThat(CliRun.exec("run", "--help").out()).contains("--no-probe");
  }

  private static String[] concat(String[] a, String... b) {
    String[] r = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }
}
