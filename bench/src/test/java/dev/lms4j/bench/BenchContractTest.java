package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class BenchContractTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void rowsFollowTheDesignContract() throws Exception {
    ObjectNode root = (ObjectNode) JSON.readTree("""
        {"models":[{"model":"resnet50","batch":32,"options":{"image":"64"},
          "capacity":{"budget_mib":201,"physical_limit_batch":416,"no_lms_largest_batch":35,
            "methods":[{"method":"auto","largest_batch":200,"ratio_to_no_lms":5.7}]},
          "methods":[{"method":"auto","min_budget_mib":56,"min_budget_ratio":0.29,
            "at_0.50":{"budget_mib":95,"fits":true,"step_ratio":1.1,
              "predicted_peak_bytes":70,"measured_peak_bytes":80,"planning_ms":900},
            "at_0.33":{"budget_mib":63,"fits":true,"step_ratio":1.2,
              "predicted_peak_bytes":50,"measured_peak_bytes":60,"planning_ms":1500},
            "at_0.25":{"budget_mib":47,"fits":false}}]}]}""");
    BenchContract.addResults(root);
    assertThat(root.get("schema").asText()).isEqualTo("lms4j-bench/1");
    JsonNode r = root.get("results").get(0);
    assertThat(r.get("model").asText()).isEqualTo("resnet50");
    assertThat(r.get("method").asText()).isEqualTo("auto");
    assertThat(r.get("budget_bytes").asLong()).isEqualTo(201L << 20);
    assertThat(r.get("image").asInt()).isEqualTo(64);
    assertThat(r.get("max_batch").asInt()).isEqualTo(200);
    assertThat(r.get("max_batch_no_lms").asInt()).isEqualTo(35);
    assertThat(r.get("capacity_ratio").asDouble()).isEqualTo(5.7);
    assertThat(r.get("physical_limit_batch").asInt()).isEqualTo(416);
    assertThat(r.get("step_time_ratio").get("0.50").asDouble()).isEqualTo(1.1);
    assertThat(r.get("step_time_ratio").get("0.33").asDouble()).isEqualTo(1.2);
    assertThat(r.get("step_time_ratio").get("0.25").isNull()).isTrue();
    // peaks and planning time at the tightest fraction that trained (0.33)
    assertThat(r.get("predicted_peak_bytes").asLong()).isEqualTo(50);
    assertThat(r.get("measured_peak_bytes").asLong()).isEqualTo(60);
    assertThat(r.get("planning_ms").asLong()).isEqualTo(1500);
    assertThat(r.get("peak_budget_bytes").asLong()).isEqualTo(63L << 20);
    assertThat(r.get("min_budget_bytes").asLong()).isEqualTo(56L << 20);
  }

  @Test
  void theCommittedQuickResultsHoldTheContract() throws Exception {
    Path file = Path.of("..", "docs", "bench", "models-quick.json");
    assertThat(file).exists();
    JsonNode root = JSON.readTree(Files.readString(file));
    assertThat(root.get("schema").asText()).isEqualTo(BenchContract.SCHEMA);
    assertThat(root.get("results")).isNotEmpty();
    for (JsonNode r : root.get("results")) {
      for (String k : new String[] {"model", "method", "budget_bytes", "image", "max_batch",
          "max_batch_no_lms", "capacity_ratio", "physical_limit_batch", "step_time_ratio",
          "predicted_peak_bytes", "measured_peak_bytes", "planning_ms"}) {
        assertThat(r.has(k)).as("%s in %s/%s", k, r.get("model"), r.get("method")).isTrue();
      }
    }
  }
}
