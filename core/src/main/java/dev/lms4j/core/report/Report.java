package dev.lms4j.core.report;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * The run report, schema {@code lms4j-report/1} (DESIGN.md). Fill the sections that apply, then
 * {@link #write(Path)}; {@code measured} is absent for analysis-only runs.
 *
 * <pre>{@code
 * Report r = new Report("resnet", 32, budget, "tflms");
 * r.graph(ops, tensors, paramBytes);
 * r.write(Path.of("report.json"));
 * }</pre>
 */
public final class Report {
  /** Schema name written into every report. */
  public static final String SCHEMA = "lms4j-report/1";
  private static final ObjectMapper JSON = new ObjectMapper();

  private final ObjectNode root = JSON.createObjectNode();

  /** A report for a model (or graph file) at a batch size, budget (0: none) and LMS mode. */
  public Report(String model, long batch, long budgetBytes, String lms) {
    root.put("schema", SCHEMA).put("model", model).put("batch", batch);
    if (budgetBytes > 0) {
      root.put("budget_bytes", budgetBytes);
    } else {
      root.putNull("budget_bytes");
    }
    root.put("lms", lms);
    root.putNull("error");
  }

  /** Graph sizes. */
  public Report graph(int ops, int tensors, long parameterBytes) {
    root.putObject("graph").put("ops", ops).put("tensors", tensors)
        .put("parameter_bytes", parameterBytes);
    return this;
  }

  /** The plan's figures and the chosen parameters (as a JSON object). */
  public Report plan(int swapOuts, int swapIns, long swappedBytes, int recomputedOps,
      long recomputedBytes, long planningMs, ObjectNode parameters) {
    ObjectNode p = root.putObject("plan").put("swap_outs", swapOuts).put("swap_ins", swapIns)
        .put("swapped_bytes", swappedBytes).put("recomputed_ops", recomputedOps)
        .put("recomputed_bytes", recomputedBytes).put("planning_ms", planningMs);
    if (parameters != null) {
      p.set("parameters", parameters);
    }
    return this;
  }

  /** Simulated peaks before and after the rewrite. */
  public Report predicted(long before, long after) {
    root.putObject("predicted_peak_bytes").put("before", before).put("after", after);
    return this;
  }

  /**
   * The measured section.
   *
   * @param fits       every step ran
   * @param peakBytes  measured peak, or -1 when unknown (written as null)
   * @param peakSource how the peak was measured
   * @param msMedian   median step time
   * @param steps      step numbers, losses and times
   */
  public Report measured(boolean fits, long peakBytes, String peakSource, double msMedian,
      int[] stepNo, double[] loss, double[] ms) {
    ObjectNode m = root.putObject("measured").put("fits", fits);
    if (peakBytes >= 0) {
      m.put("peak_bytes", peakBytes);
    } else {
      m.putNull("peak_bytes");
    }
    m.put("peak_source", peakSource);
    if (Double.isNaN(msMedian)) {
      m.putNull("ms_per_step_median");
    } else {
      m.put("ms_per_step_median", msMedian);
    }
    ArrayNode s = m.putArray("steps");
    for (int i = 0; i < stepNo.length; i++) {
      s.addObject().put("step", stepNo[i]).put("loss", loss[i]).put("ms", ms[i]);
    }
    return this;
  }

  /** Records the error that ended the run. */
  public Report error(String message) {
    root.put("error", message);
    return this;
  }

  /** Adds a free-form field at the top level (for extensions; keep names snake_case). */
  public ObjectNode extra(String name) {
    return root.putObject(name);
  }

  /** The report as a JSON tree (live: changes show in the report). */
  public ObjectNode json() {
    return root;
  }

  /** Pretty-printed JSON. */
  public String toJson() {
    try {
      return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Writes the report atomically (temp file, then rename). */
  public void write(Path file) throws IOException {
    Path abs = file.toAbsolutePath();
    Path tmp = abs.resolveSibling(abs.getFileName() + ".tmp");
    Files.writeString(tmp, toJson() + "\n");
    Files.move(tmp, abs, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }
}
