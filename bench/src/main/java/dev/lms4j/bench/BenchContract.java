package dev.lms4j.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The benchmark contract of DESIGN.md ({@code "schema": "lms4j-bench/1"}): one {@code results}
 * row per model and method, derived from the per-model detail the model benchmark records (kept
 * beside it under {@code models}).
 *
 * <pre>{@code
 * BenchContract.addResults(root);   // root as ModelBench.run builds it
 * }</pre>
 */
public final class BenchContract {
  /** The contract's schema name. */
  public static final String SCHEMA = "lms4j-bench/1";
  /** The fractions of the no-LMS budget the contract reports step-time ratios at. */
  private static final String[] FRACTIONS = {"0.50", "0.33", "0.25"};

  private BenchContract() {}

  /**
   * Sets the contract's schema on {@code root} and adds its {@code results} rows (replacing any),
   * one per model and method of {@code root.models}.
   */
  public static ObjectNode addResults(ObjectNode root) {
    root.put("schema", SCHEMA);
    ArrayNode results = root.putArray("results");
    for (JsonNode m : root.path("models")) {
      JsonNode cap = m.path("capacity");
      for (JsonNode method : m.path("methods")) {
        results.add(row(m, cap, method));
      }
    }
    return root;
  }

  private static ObjectNode row(JsonNode m, JsonNode cap, JsonNode method) {
    String name = method.path("method").asText();
    ObjectNode r = new ObjectMapper().createObjectNode();
    r.put("model", m.path("model").asText()).put("method", name)
        .put("batch", m.path("batch").asInt());
    if (cap.has("budget_mib")) {
      r.put("budget_bytes", cap.path("budget_mib").asLong() << 20);
    }
    JsonNode image = m.path("options").path("image");
    if (image.isTextual() || image.isNumber()) {
      r.put("image", image.asInt());
    } else {
      r.putNull("image");
    }
    JsonNode capRow = find(cap.path("methods"), name);
    putOrNull(r, "max_batch", capRow.path("largest_batch"));
    putOrNull(r, "max_batch_no_lms", cap.path("no_lms_largest_batch"));
    putOrNull(r, "capacity_ratio", capRow.path("ratio_to_no_lms"));
    putOrNull(r, "physical_limit_batch", cap.path("physical_limit_batch"));
    if (method.path("min_budget_mib").asLong(-1) > 0) {
      r.put("min_budget_bytes", method.path("min_budget_mib").asLong() << 20);
      putOrNull(r, "min_budget_ratio", method.path("min_budget_ratio"));
    } else {
      r.putNull("min_budget_bytes").putNull("min_budget_ratio");
    }
    ObjectNode ratios = r.putObject("step_time_ratio");
    JsonNode tightest = null;
    for (String f : FRACTIONS) {
      JsonNode at = method.path("at_" + f);
      putOrNull(ratios, f, at.path("fits").asBoolean(false) ? at.path("step_ratio")
          : com.fasterxml.jackson.databind.node.MissingNode.getInstance());
      if (at.path("fits").asBoolean(false)) {
        tightest = at;
      }
    }
    // peaks and planning time at the tightest fraction where the method trained
    if (tightest != null) {
      putOrNull(r, "predicted_peak_bytes", tightest.path("predicted_peak_bytes"));
      putOrNull(r, "measured_peak_bytes", tightest.path("measured_peak_bytes"));
      putOrNull(r, "planning_ms", tightest.path("planning_ms"));
      r.put("peak_budget_bytes", tightest.path("budget_mib").asLong() << 20);
    } else {
      r.putNull("predicted_peak_bytes").putNull("measured_peak_bytes").putNull("planning_ms");
    }
    return r;
  }

  private static JsonNode find(JsonNode rows, String method) {
    for (JsonNode r : rows) {
      if (r.path("method").asText().equals(method)) {
        return r;
      }
    }
    return com.fasterxml.jackson.databind.node.MissingNode.getInstance();
  }

  private static void putOrNull(ObjectNode r, String key, JsonNode v) {
    if (v.isMissingNode() || v.isNull()) {
      r.putNull(key);
    } else {
      r.set(key, v);
    }
  }

  /** Adds the contract's rows to a results file written before the contract was restored. */
  public static void main(String[] args) throws IOException {
    ObjectMapper json = new ObjectMapper();
    for (String a : args) {
      Path p = Path.of(a);
      ObjectNode root = (ObjectNode) json.readTree(p.toFile());
      Files.writeString(p, json.writerWithDefaultPrettyPrinter()
          .writeValueAsString(addResults(root)) + "\n");
    }
  }
}
