package dev.lms4j.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** Renders benchmark JSON as a Markdown table. */
final class Markdown {
  private Markdown() {}

  /** A byte field in MiB, or "-" when the row has none (no plan at that budget). */
  private static String mib(JsonNode row, String field) {
    return row.has(field) && row.get(field).asLong() >= 0
        ? Long.toString(row.get(field).asLong() >> 20) : "-";
  }

  static String of(ObjectNode root) {
    StringBuilder sb = new StringBuilder();
    sb.append("# lms4j swap benchmark\n\n");
    sb.append("Machine: ").append(root.path("machine").asText()).append("\n\n");
    sb.append("Command: `").append(root.path("command").asText()).append("`\n\n");
    sb.append("| model | method | batch | min budget no LMS (MiB) | min budget LMS (MiB) | ratio | "
        + "step time at 50% / unbudgeted | predicted peak (MiB) | measured peak (MiB) | "
        + "planning (ms) |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (JsonNode r : root.path("results")) {
      sb.append(String.format(java.util.Locale.ROOT, "| %s | %s | %d | %d | %d | %.2f | %s | %s | %s | %s |%n",
          r.path("model").asText(), r.path("method").asText(), r.path("batch").asInt(),
          r.path("min_budget_no_lms_bytes").asLong() >> 20,
          r.path("min_budget_lms_bytes").asLong() >> 20, r.path("min_budget_ratio").asDouble(),
          r.path("step_time_ratio").has("0.50")
              ? String.format(java.util.Locale.ROOT, "%.2fx",
                  r.path("step_time_ratio").path("0.50").asDouble()) : "n/a",
          mib(r, "predicted_peak_bytes"), mib(r, "measured_peak_bytes"),
          r.has("planning_ms") ? Long.toString(r.path("planning_ms").asLong()) : "-"));
    }
    sb.append("\n| synthetic graph ops | planning (ms) | simulations |\n|---|---|---|\n");
    for (JsonNode p : root.path("planning")) {
      sb.append(String.format(java.util.Locale.ROOT, "| %d | %.0f | %d |%n", p.path("ops").asInt(),
          p.path("planning_ms").asDouble(), p.path("simulations").asInt()));
    }
    return sb.toString();
  }
}
