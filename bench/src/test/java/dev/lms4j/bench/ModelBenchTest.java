package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.train.models.ModelZoo;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The smoke suite end to end (budgeted worker JVMs): it must find that LMS
 * trains below the no-LMS smallest budget and beyond its largest batch, and write its files.
 */
class ModelBenchTest {
  @Test
  void smokeSuiteMeasuresEveryColumn(@TempDir Path dir) throws Exception {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    ObjectNode root = ModelBench.run(ModelBench.suite("smoke"), dir,
        new PrintStream(buf, true, StandardCharsets.UTF_8));

    JsonNode model = root.path("models").path(0);
    Map<String, JsonNode> rows = new HashMap<>();
    model.path("methods").forEach(r -> rows.put(r.path("method").asText(), r));
    assertThat(rows.keySet()).containsExactlyInAnyOrder("none", "grappler-recomp", "tflms",
        "auto", "auto+probe");
    long none = rows.get("none").path("min_budget_mib").asLong();
    assertThat(none).isPositive();
    // the floor (resident + largest op) is below the no-LMS budget, and LMS gets closer to it
    assertThat(model.path("floor_bytes").asLong() >> 20).isLessThan(none);
    assertThat(rows.get("tflms").path("min_budget_mib").asLong()).isPositive().isLessThan(none);
    // auto as run and train use it (its plan probed first) trains below no LMS; auto's own
    // first plan is never worse than no LMS. Below, the first plan alone may run out of memory
    // where the model misses (a CI machine: 22-24 MiB with no-LMS at 27), which is what the
    // probe is for
    assertThat(rows.get("auto+probe").path("min_budget_mib").asLong()).isPositive()
        .isLessThan(none);
    assertThat(rows.get("auto").path("min_budget_mib").asLong()).isPositive()
        .isLessThanOrEqualTo(none);

    // step time at 80%: two rounds for each LMS method that fits there, the ratio their median
    int timed = 0;
    for (String m : List.of("tflms", "auto", "auto+probe")) {
      JsonNode at = rows.get(m).path("at_0.80");
      if (at.path("fits").asBoolean()) {
        timed++;
        assertThat(at.path("rounds").asInt()).as(m).isEqualTo(2);
        // the median of two rounds is their mean
        assertThat(at.path("step_ratio").asDouble()).as(m).isCloseTo(
            (at.path("step_ratio_min").asDouble() + at.path("step_ratio_max").asDouble()) / 2,
            org.assertj.core.api.Assertions.within(1e-12));
        assertThat(at.path("step_ratio_min").asDouble()).as(m).isPositive();
      }
    }
    assertThat(timed).as(buf.toString(StandardCharsets.UTF_8)).isPositive();

    Map<String, Integer> cap = new HashMap<>();
    model.path("capacity").path("methods").forEach(r -> cap.put(r.path("method").asText(),
        r.path("largest_batch").asInt()));
    int phys = model.path("capacity").path("physical_limit_batch").asInt();
    // no LMS trains its own batch at that budget (its smallest + 5%) in most runs, but
    // TensorFlow's own smallest budget varies between processes by more than the margin now and
    // then (a fresh-clone CI, 2026-12-05: no LMS found no batch there), so what is checked is that
    // tflms trains a larger batch than the base one and than no LMS, within the physical limit
    assertThat(cap.get("none")).isLessThanOrEqualTo(phys);
    assertThat(cap.get("tflms")).isGreaterThan(Math.max(cap.get("none"),
        model.path("batch").asInt())).isLessThanOrEqualTo(phys);

    JsonNode planning = root.path("planning");
    // the smoke suite plans one 200-layer chain (5 ops a layer plus 4; the benchmark's
    // 10k/100k-op graphs are not planned here): TFLMS, hybrid and XLA-style remat find plans,
    // recompute groups alone cannot reach 3/4 of the peak on a chain and name their smallest
    // budget (as in docs/bench/models-quick.json)
    assertThat(planning).hasSize(1);
    JsonNode p0 = planning.path(0);
    assertThat(p0.path("ops").asInt()).isEqualTo(1004);
    for (String p : List.of("tflms", "hybrid", "remat_xla")) {
      assertThat(p0.has(p + "_ms")).as(p0.toString()).isTrue();
      assertThat(p0.has(p + "_error")).as(p0.toString()).isFalse();
    }
    assertThat(p0.path("remat_error").asText()).contains("smallest budget that could work");

    String md = Files.readString(dir.resolve("models-smoke.md"));
    for (String s : List.of("| tflms |", "largest batch", "Planning time")) {
      assertThat(md).contains(s);
    }
    assertThat(dir.resolve("models-smoke.json")).exists();
    // the throughput curve of the batches the capacity search ran
    assertThat(model.path("capacity").path("throughput").size()).isGreaterThan(2);
    assertThat(dir.resolve("models-smoke-mlp-throughput.png")).isNotEmptyFile();
    assertThat(md).contains("![models-smoke-mlp-throughput.png]");
  }

  @Test
  void recordedCommandRunsTheSuiteThatWasMeasured() {
    assertThat(ModelBench.command(ModelBench.suite("quick")))
        .isEqualTo("./lms4j bench --suite quick");
    assertThat(ModelBench.command(ModelBench.suite("steptime")))
        .isEqualTo("./lms4j bench --suite steptime");
    // --model over a suite: the base suite's name with the model, its batch and its options
    assertThat(ModelBench.command(ModelBench.forModel(ModelBench.suite("steptime"), "gpt2", 8,
        Map.of("width", "256", "layers", "4"))))
        .isEqualTo("./lms4j bench --suite steptime --model gpt2 --batch 8 -o layers=4 "
            + "-o width=256");
    assertThat(ModelBench.command(ModelBench.forModel(ModelBench.suite("quick"), "resnet18", 0,
        Map.of()))).isEqualTo("./lms4j bench --suite quick --model resnet18 --batch "
            + ModelZoo.getOrThrow("resnet18").defaultBatch());
  }

  @Test
  void steptimeSuiteTimesResNet50OnlyInNineRoundsAndForModelKeepsThat() {
    ModelBench.Suite s = ModelBench.suite("steptime");
    assertThat(s.rounds()).isEqualTo(9);
    assertThat(s.fractions()).containsExactly(0.50, 0.33, 0.25);
    assertThat(s.methods()).containsExactly(ModelBench.Method.NONE, ModelBench.Method.TFLMS,
        ModelBench.Method.SWAP, ModelBench.Method.REMAT_XLA, ModelBench.Method.AUTO,
        ModelBench.Method.AUTO_PROBE);
    assertThat(s.cases()).singleElement().satisfies(c -> {
      assertThat(c.model()).isEqualTo("resnet50");
      assertThat(c.capacity()).isFalse();
      assertThat(c.inputSize()).isFalse();
    });
    // --model over steptime: still no capacity or input-size search; over quick: both
    ModelBench.Suite one = ModelBench.forModel(s, "resnet18", 16, Map.of());
    assertThat(one.cases().get(0).capacity()).isFalse();
    assertThat(one.cases().get(0).inputSize()).isFalse();
    assertThat(one.rounds()).isEqualTo(9);
    ModelBench.Suite quick = ModelBench.forModel(ModelBench.suite("quick"), "resnet18", 16,
        Map.of());
    assertThat(quick.cases().get(0).capacity()).isTrue();
    assertThat(quick.cases().get(0).inputSize()).isTrue();
    // the quick suite measures auto as run and train use it, in its size searches too; the
    // smoke test's size searches leave it out (CI time), the full suite has none of it
    assertThat(quick.methods()).contains(ModelBench.Method.AUTO_PROBE);
    assertThat(quick.probedSizes()).isTrue();
    assertThat(ModelBench.suite("smoke").probedSizes()).isFalse();
    assertThat(ModelBench.suite("full").methods()).doesNotContain(ModelBench.Method.AUTO_PROBE);
  }
}
