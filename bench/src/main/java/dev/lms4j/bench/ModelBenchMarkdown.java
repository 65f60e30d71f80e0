package dev.lms4j.bench;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Iterator;
import java.util.Locale;
import java.util.Map;

/** Renders {@link ModelBench} JSON as Markdown tables. */
final class ModelBenchMarkdown {
  private ModelBenchMarkdown() {}

  static String of(JsonNode root) {
    StringBuilder sb = new StringBuilder();
    sb.append("# lms4j model benchmark (suite ").append(root.path("suite").asText())
        .append(")\n\n");
    sb.append("Machine: ").append(root.path("machine").asText()).append("\n\n");
    sb.append("Command: `").append(root.path("command").asText()).append("`  \n");
    sb.append(String.format(Locale.ROOT, "Wall time: %.1f min%n%n",
        root.path("wall_seconds").asDouble() / 60));
    sb.append("This is a CPU testbed: the budget is TensorFlow's BFC allocator limit, and host "
        + "transfers are cheap relative to compute compared with a GPU's PCIe link, so ratios "
        + "compare with published figures, absolute times do not. Step-time ratios come from "
        + "rounds in the same minutes: each round runs every method once (the order rotated "
        + "between rounds) and then one unbudgeted run; a round's ratio is the method's median "
        + "step time over the faster of the unbudgeted runs around it, and the table shows "
        + "the median over rounds with their range.\n\n");
    for (JsonNode m : root.path("models")) {
      sb.append("## ").append(m.path("model").asText()).append(" (batch ")
          .append(m.path("batch").asInt()).append(", ").append(m.path("options").asText())
          .append(")\n\n");
      sb.append(String.format(Locale.ROOT, "%d ops; unbudgeted %.0f ms/step, measured peak %d "
          + "MiB; floor (resident + largest op) %d MiB.%n%n", m.path("ops").asInt(),
          m.path("unbudgeted_ms_per_step").asDouble(),
          m.path("unbudgeted_peak_bytes").asLong() >> 20, m.path("floor_bytes").asLong() >> 20));
      JsonNode first = m.path("methods").path(0);
      StringBuilder head = new StringBuilder("| method | smallest budget (MiB) | of no-LMS |");
      StringBuilder rule = new StringBuilder("|---|---|---|");
      for (Iterator<Map.Entry<String, JsonNode>> it = first.fields(); it.hasNext();) {
        var e = it.next();
        if (e.getKey().startsWith("at_")) {
          String f = e.getKey().substring(3);
          String pct = String.format(Locale.ROOT, "%.0f%%", Double.parseDouble(f) * 100);
          head.append(" step time at ").append(pct).append(" [range over rounds] (predicted) | peak at ").append(pct)
              .append(" measured / predicted (MiB) | swapped MiB / recomputed ops at ")
              .append(pct).append(" |");
          rule.append("---|---|---|");
        }
      }
      sb.append(head).append('\n').append(rule).append('\n');
      for (JsonNode r : m.path("methods")) {
        long min = r.path("min_budget_mib").asLong();
        sb.append("| ").append(r.path("method").asText()).append(" | ")
            .append(min > 0 ? Long.toString(min) : "none")
            .append(r.has("min_budget_from")
                ? " (" + r.path("min_budget_from").asText() + ")" : "").append(" | ")
            .append(min > 0 ? String.format(Locale.ROOT, "%.2f",
                r.path("min_budget_ratio").asDouble()) : "-").append(" |");
        for (Iterator<Map.Entry<String, JsonNode>> it = r.fields(); it.hasNext();) {
          var e = it.next();
          if (!e.getKey().startsWith("at_")) {
            continue;
          }
          JsonNode at = e.getValue();
          if (at.path("fits").asBoolean()) {
            sb.append(String.format(Locale.ROOT, " %.2fx%s%s |", at.path("step_ratio").asDouble(),
                at.path("rounds").asInt(1) > 1 ? String.format(Locale.ROOT, " [%.2f-%.2f]",
                    at.path("step_ratio_min").asDouble(), at.path("step_ratio_max").asDouble())
                    : "",
                at.has("predicted_step_ratio") ? String.format(Locale.ROOT, " (%.2fx)",
                    at.path("predicted_step_ratio").asDouble()) : ""));
            sb.append(String.format(Locale.ROOT, " %d / %s |",
                at.path("measured_peak_bytes").asLong() >> 20,
                at.has("predicted_peak_bytes")
                    ? Long.toString(at.path("predicted_peak_bytes").asLong() >> 20) : "-"));
            sb.append(at.has("swapped_bytes") ? String.format(Locale.ROOT, " %d / %d |",
                at.path("swapped_bytes").asLong() >> 20, at.path("recomputed_ops").asInt())
                : " - |");
          } else if (at.path("why").asText().startsWith("below")) {
            sb.append(" below its smallest budget | - | - |");
          } else {
            String why = at.path("why").asText("does not fit");
            sb.append(" ").append(why.startsWith("no plan") ? "no plan" : why.replace('|', '/'))
                .append(" | - | - |");
          }
        }
        sb.append('\n');
      }
      sb.append('\n');
      JsonNode cap = m.path("capacity");
      if (!cap.isMissingNode()) {
        sb.append(String.format(Locale.ROOT, "Capacity at %d MiB (the no-LMS smallest budget at "
            + "batch %d, plus 5%%); physical limit (resident + largest op fit): batch %d.%n%n",
            cap.path("budget_mib").asLong(), cap.path("base_batch").asInt(),
            cap.path("physical_limit_batch").asInt()));
        sb.append("| method | largest batch | x no-LMS | of physical limit |\n|---|---|---|---|\n");
        for (JsonNode r : cap.path("methods")) {
          sb.append(String.format(Locale.ROOT, "| %s | %d | %.2fx | %.0f%% |%n",
              r.path("method").asText(), r.path("largest_batch").asInt(),
              r.path("ratio_to_no_lms").asDouble(),
              100 * r.path("share_of_physical_limit").asDouble()));
        }
        skippedNote(sb, cap);
        sb.append('\n');
      }
      JsonNode sz = m.path("input_size");
      if (!sz.isMissingNode()) {
        sb.append(String.format(Locale.ROOT, "Largest `%s` at batch %d and %d MiB (base %d; "
            + "physical limit %d).%n%n", sz.path("option").asText(), m.path("batch").asInt(),
            sz.path("budget_mib").asLong(), sz.path("base").asInt(),
            sz.path("physical_limit").asInt()));
        sb.append("| method | largest | x no-LMS | of physical limit |\n|---|---|---|---|\n");
        for (JsonNode r : sz.path("methods")) {
          sb.append(String.format(Locale.ROOT, "| %s | %d | %.2fx | %.0f%% |%n",
              r.path("method").asText(), r.path("largest").asInt(),
              r.path("ratio_to_no_lms").asDouble(),
              100 * r.path("share_of_physical_limit").asDouble()));
        }
        skippedNote(sb, sz);
        sb.append('\n');
      }
    }
    sb.append("## Planning time on synthetic training chains\n\n");
    sb.append("| ops | planner | ms |\n|---|---|---|\n");
    for (JsonNode p : root.path("planning")) {
      for (Iterator<Map.Entry<String, JsonNode>> it = p.fields(); it.hasNext();) {
        var e = it.next();
        if (e.getKey().endsWith("_ms") && !e.getKey().endsWith("failed_after_ms")) {
          sb.append(String.format(Locale.ROOT, "| %d | %s | %.0f |%n", p.path("ops").asInt(),
              e.getKey().substring(0, e.getKey().length() - 3), e.getValue().asDouble()));
        }
      }
    }
    return sb.toString();
  }

  /** The methods a capacity or input-size search left out, and why. */
  private static void skippedNote(StringBuilder sb, JsonNode n) {
    java.util.List<String> names = new java.util.ArrayList<>();
    n.path("skipped_methods").forEach(x -> names.add(x.asText()));
    if (!names.isEmpty()) {
      sb.append("\nNot searched (their smallest budget is above 90% of no-LMS's: they "
          + "cannot train much more than no-LMS at this budget): ")
          .append(String.join(", ", names)).append(".\n");
    }
  }
}
