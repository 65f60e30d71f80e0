package dev.lms4j.cli;

import dev.lms4j.tf.TrainingGraph;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code lms4j train}: train a zoo model under a budget. */
@Command(name = "train", mixinStandardHelpOptions = true,
    description = "Train a model of the zoo on synthetic data for some steps, under a memory "
        + "budget, with or without LMS. The steps run in a worker JVM whose TensorFlow "
        + "allocator is limited to the budget.")
final class TrainCommand implements Callable<Integer> {
  @Mixin ModelArgs modelArgs;
  @Mixin LmsOptions lms;
  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Option(names = "--steps", defaultValue = "5", description = "Training steps (default 5).")
  int steps;

  @Option(names = "--epochs", description = "Not available yet (the training loop with "
      + "datasets comes with the trainer); use --steps.")
  Integer epochs;

  @Option(names = "--data", defaultValue = "synthetic",
      description = "synthetic (default). fashion-mnist arrives with the trainer.")
  String data;

  @Option(names = "--report", paramLabel = "FILE.json", description = "Write the report here.")
  Path report;

  @Option(names = "--data-dir", paramLabel = "DIR", description = "Not available yet (comes "
      + "with the trainer and Fashion-MNIST).")
  Path dataDir;

  @Option(names = "--checkpoint-dir", paramLabel = "DIR",
      description = "Not available yet (checkpoint backends come with the trainer).")
  Path checkpointDir;

  @Option(names = "--checkpoint-backend", paramLabel = "NAME", description = "Not available yet.")
  String checkpointBackend;

  @Option(names = "--checkpoint-every", paramLabel = "N", description = "Not available yet.")
  Integer checkpointEvery;

  @Option(names = "--resume", description = "Not available yet.")
  boolean resume;

  @Mixin PlotOption plot;

  @Override
  public Integer call() throws Exception {
    if (modelArgs.model == null) {
      throw new IllegalArgumentException("train needs --model NAME (see 'lms4j models')");
    }
    if (!"synthetic".equals(data)) {
      throw new IllegalArgumentException("--data " + data + " is not available in this version; "
          + "use --data synthetic");
    }
    if (dataDir != null || checkpointDir != null || checkpointBackend != null
        || checkpointEvery != null || resume) {
      throw new IllegalArgumentException("--data-dir, --checkpoint-* and --resume are not "
          + "available in this version of lms4j (they come with the trainer and checkpoint "
          + "backends)");
    }
    plot.check();
    if (epochs != null) {
      throw new IllegalArgumentException("--epochs is not available in this version; use --steps");
    }
    if (steps < 1) {
      throw new IllegalArgumentException("--steps must be >= 1");
    }
    Reports.checkWritable(report);
    TrainingGraph tg = modelArgs.build();
    Pipeline.Outcome o = Pipeline.execute(modelArgs.model, tg, lms, steps,
        new java.io.PrintStream(System.out, true));
    Reports.write(o.report(), report);
    return o.exitCode();
  }
}
