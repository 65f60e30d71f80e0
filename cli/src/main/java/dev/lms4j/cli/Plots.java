package dev.lms4j.cli;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.report.Report;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.viz.HtmlReport;
import dev.lms4j.viz.MemoryChart;
import dev.lms4j.viz.MemoryTimeline;
import java.io.IOException;
import java.nio.file.Path;

/** The memory plot and the HTML page for the commands' outcomes. */
final class Plots {
  private Plots() {}

  /**
   * The model and plans an outcome drew on; when planning failed, the original graph without a
   * plan (the plot then shows why it does not fit).
   */
  static LmsResult planOf(Pipeline.Outcome o, LmsOptions opts) {
    if (o.lms() != null) {
      return o.lms();
    }
    return original(o.graph(), opts);
  }

  /**
   * Plans {@code tg} as the trainer's LMS callback does (the planners are deterministic, so this
   * is the plan the run used); the original graph alone with LMS off or when nothing fits.
   */
  static LmsResult plan(TrainingGraph tg, LmsOptions opts) {
    if (opts.mode() == LmsMode.OFF) {
      return original(tg, opts);
    }
    try {
      return opts.lms((int) tg.manifest().batchSize()).rewrite(tg);
    } catch (PlanningException e) {
      return original(tg, opts);
    }
  }

  private static LmsResult original(TrainingGraph tg, LmsOptions opts) {
    return Pipeline.analyzeOnly(tg, opts.params((int) tg.manifest().batchSize()),
        opts.backwardScope());
  }

  /**
   * Writes the memory plot of {@code lms} ({@code measuredPeak} -1: none); {@code tg} is the
   * graph as given (drawn before LMS when a scheduling step changed it before planning).
   */
  static void memory(Path file, String name, TrainingGraph tg, LmsResult lms, LmsOptions opts,
      Report report, long measuredPeak) throws IOException {
    MemoryChart.write(timeline(tg, lms, opts), marks(name, opts, report, measuredPeak), file);
  }

  /** The timeline the plot draws: {@code tg} as given, then as planned. */
  static MemoryTimeline timeline(TrainingGraph tg, LmsResult lms, LmsOptions opts) {
    return MemoryTimeline.of(before(tg, lms, opts), lms.model(), lms.plan(), lms.recompute());
  }

  /** Writes the HTML page of a report and its plan. */
  static void html(Path file, Report report, String name, TrainingGraph tg, LmsResult lms,
      LmsOptions opts, long measuredPeak) throws IOException {
    HtmlReport.write(HtmlReport.render(report.json(), before(tg, lms, opts), lms.model(),
        lms.plan(), lms.recompute(), marks(name, opts, report, measuredPeak)), file);
  }

  /** The model of the graph as given: {@code lms.model()} unless a scheduling step changed it. */
  private static DataflowGraph before(TrainingGraph tg, LmsResult lms, LmsOptions opts) {
    return lms.scheduling() == null ? lms.model() : original(tg, opts).model();
  }

  private static MemoryChart.Marks marks(String name, LmsOptions opts, Report report,
      long measuredPeak) {
    return MemoryChart.Marks.of(name, opts.budgetBytes())
        .memRatio(opts.mode() == LmsMode.OFF ? 1.0 : planRatio(report, opts))
        .measuredPeak(measuredPeak);
  }

  /**
   * The memory ratio the plan drawn was made at: where a probe ran, that of its last attempt
   * that ran under the budget (the plan trained; a probe's first ratio is its own default,
   * {@code Probe.PROBED_MEM_RATIO}, and re-plans lower it), else the options' ratio.
   */
  static double planRatio(Report report, LmsOptions opts) {
    com.fasterxml.jackson.databind.JsonNode attempts = report.json().path("probe")
        .path("attempts");
    for (int i = attempts.size() - 1; i >= 0; i--) {
      com.fasterxml.jackson.databind.JsonNode a = attempts.get(i);
      if (a.path("fits").asBoolean() && a.has("mem_ratio")) {
        return a.get("mem_ratio").asDouble();
      }
    }
    return opts.effectiveMemRatio();
  }
}
