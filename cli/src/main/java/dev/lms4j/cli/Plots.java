package dev.lms4j.cli;

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
    return Pipeline.analyzeOnly(tg, opts.params((int) tg.manifest().batchSize()));
  }

  /** Writes the memory plot of {@code lms} ({@code measuredPeak} -1: none). */
  static void memory(Path file, String name, LmsResult lms, LmsOptions opts, long measuredPeak)
      throws IOException {
    MemoryChart.write(timeline(lms), marks(name, opts, measuredPeak), file);
  }

  /** Writes the HTML page of a report and its plan. */
  static void html(Path file, Report report, String name, LmsResult lms, LmsOptions opts,
      long measuredPeak) throws IOException {
    HtmlReport.write(HtmlReport.render(report.json(), lms.model(), lms.plan(), lms.recompute(),
        marks(name, opts, measuredPeak)), file);
  }

  private static MemoryTimeline timeline(LmsResult lms) {
    return MemoryTimeline.of(lms.model(), lms.plan(), lms.recompute());
  }

  private static MemoryChart.Marks marks(String name, LmsOptions opts, long measuredPeak) {
    return MemoryChart.Marks.of(name, opts.budgetBytes())
        .memRatio(opts.mode() == LmsMode.OFF ? 1.0 : opts.memRatio).measuredPeak(measuredPeak);
  }
}
