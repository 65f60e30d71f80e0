package dev.lms4j.cli;

import dev.lms4j.tf.TrainingGraph;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code lms4j run}: train an exported GraphDef with synthetic feeds. */
@Command(name = "run", mixinStandardHelpOptions = true,
    description = "Run training steps of an exported training GraphDef (binary .pb, or a "
        + "SavedModel directory) described by a manifest (feeds, loss, train_op, init), or of a "
        + "zoo model (--model), with synthetic seeded feeds.")
final class RunCommand implements Callable<Integer> {
  @Option(names = "--graph", paramLabel = "FILE.pb",
      description = "Binary GraphDef, or a SavedModel directory.") Path graph;
  @Option(names = "--manifest", paramLabel = "FILE.json") Path manifest;
  @Mixin ModelArgs modelArgs;
  @Mixin LmsOptions lms;
  @Option(names = "--steps", defaultValue = "5") int steps;
  @Option(names = "--report", paramLabel = "FILE.json") Path report;
  @Mixin PlotOption plot;
  @Option(names = "--no-probe", description = "Train the plan as it is: skip the probe (the "
      + "plan's first step run under the budget before training, re-planned when it runs out "
      + "of memory).")
  boolean noProbe;

  @Override
  public Integer call() throws Exception {
    if (steps < 1) {
      throw new IllegalArgumentException("--steps must be >= 1");
    }
    plot.check();
    Reports.checkWritable(report);
    lms.validateOptions();
    TrainingGraph tg = modelArgs.buildOrLoad(graph, manifest);
    Pipeline.Outcome o = Pipeline.execute(modelArgs.label(graph), tg, lms, steps, !noProbe,
        System.out);
    Reports.write(o.report(), report);
    plot.write(modelArgs.label(graph), tg, o, lms, System.out);
    return o.exitCode();
  }
}
