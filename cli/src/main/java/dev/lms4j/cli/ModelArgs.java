package dev.lms4j.cli;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.models.ModelSpec;
import dev.lms4j.train.models.ModelZoo;
import java.util.LinkedHashMap;
import java.util.Map;
import picocli.CommandLine.Option;

/** {@code --model NAME [--batch N] [-o key=value ...]}. */
final class ModelArgs {
  @Option(names = "--model", paramLabel = "NAME", description = "A model of the zoo "
      + "(see 'lms4j models').")
  String model;

  @Option(names = "--batch", paramLabel = "N", description = "Batch size (default: the "
      + "model's).")
  Integer batch;

  @Option(names = {"-o", "--option"}, paramLabel = "KEY=VALUE",
      description = "Model option, e.g. -o image=32 (see 'lms4j models').")
  Map<String, String> options = new LinkedHashMap<>();

  /** Builds the model's training graph; unknown names or options throw IllegalArgumentException. */
  TrainingGraph build() {
    ModelSpec spec = ModelZoo.getOrThrow(model);
    int b = batch == null ? spec.defaultBatch() : batch;
    if (b < 1) {
      throw new IllegalArgumentException("--batch must be >= 1");
    }
    return spec.build(b, options);
  }
}
