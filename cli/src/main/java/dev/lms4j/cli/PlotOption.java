package dev.lms4j.cli;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.viz.ChartFiles;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/** {@code --plot FILE.svg|png}: the plan's predicted memory over one step. */
final class PlotOption {
  @Option(names = "--plot", paramLabel = "FILE.svg|png",
      description = "Draw the predicted device memory over one step, before and after LMS, "
          + "against the budget, with swap-outs, swap-ins and recomputed ops marked (and the "
          + "measured peak after a run), as SVG or PNG by the file's extension.")
  Path plot;

  /** Fails (bad input) before anything runs when the file cannot be written. */
  void check() {
    if (plot != null) {
      ChartFiles.checkTarget(plot);
    }
  }

  /** Draws the outcome's plan for {@code tg} (the graph as given) when a plot was asked for. */
  void write(String name, TrainingGraph tg, Pipeline.Outcome o, LmsOptions opts, PrintStream out)
      throws IOException {
    if (plot != null) {
      Plots.memory(plot, name, tg, Plots.planOf(o, opts), opts, o.report(),
          o.run() != null ? o.run().peakBytes() : -1);
      out.println("Plot: " + plot);
    }
  }
}
