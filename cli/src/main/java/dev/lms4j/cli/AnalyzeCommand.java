package dev.lms4j.cli;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.viz.HtmlReport;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code lms4j analyze}: plan without running. */
@Command(name = "analyze", mixinStandardHelpOptions = true,
    description = "Plan LMS for a zoo model or an exported graph and report the predicted "
        + "peaks and the plan, without running anything: a static analysis, so no probe runs "
        + "(train and run probe a plan's first step under the budget before training on).")
final class AnalyzeCommand implements Callable<Integer> {
  @Mixin ModelArgs modelArgs;
  @Option(names = "--graph", paramLabel = "FILE.pb") Path graph;
  @Option(names = "--manifest", paramLabel = "FILE.json") Path manifest;
  @Mixin LmsOptions lms;
  @Option(names = "--report", paramLabel = "FILE.json") Path report;
  @Mixin PlotOption plot;
  @Option(names = "--html", paramLabel = "FILE.html",
      description = "Write one self-contained page (no network) with the report's numbers, the "
          + "memory plot, the producer-consumer distance histograms and the plan in a sortable "
          + "table.")
  Path html;

  @Override
  public Integer call() throws Exception {
    plot.check();
    if (html != null) {
      HtmlReport.checkTarget(html);
    }
    Reports.checkWritable(report);
    lms.validateOptions();
    TrainingGraph tg;
    String name;
    if (modelArgs.model != null && graph == null) {
      tg = modelArgs.build();
      name = modelArgs.model;
    } else if (modelArgs.model == null && graph != null && manifest != null) {
      tg = modelArgs.load(graph, manifest);
      name = graph.getFileName().toString();
    } else {
      throw new IllegalArgumentException("analyze needs either --model NAME or --graph FILE.pb "
          + "with --manifest FILE.json");
    }
    if (lms.budget == null) {
      throw new IllegalArgumentException("analyze needs --budget SIZE");
    }
    Pipeline.Outcome o = Pipeline.execute(name, tg, lms, 0, System.out);
    Reports.write(o.report(), report);
    plot.write(name, tg, o, lms, System.out);
    if (html != null) {
      Plots.html(html, o.report(), name, tg, Plots.planOf(o, lms), lms, -1);
      System.out.println("Page: " + html);
    }
    return o.exitCode();
  }
}
