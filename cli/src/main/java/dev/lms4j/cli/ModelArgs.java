package dev.lms4j.cli;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.corpus.Corpus;
import dev.lms4j.train.models.ModelSpec;
import dev.lms4j.train.models.ModelZoo;
import java.util.LinkedHashMap;
import java.util.Map;
import picocli.CommandLine.Option;

/** {@code --model NAME [--batch N] [-o key=value ...]}. */
final class ModelArgs {
  /** The prefix that names a graph of the test corpus: {@code corpus:unet}. */
  static final String CORPUS = "corpus:";

  @Option(names = "--model", paramLabel = "NAME", description = "A model of the zoo, or "
      + "corpus:FAMILY, a graph of lms4j's test corpus built as TF Java users build theirs "
      + "(-o size=small|test|bench, default bench; -o seed=N); see 'lms4j models'.")
  String model;

  @Option(names = "--batch", paramLabel = "N", description = "Batch size (default: the "
      + "model's).")
  Integer batch;

  @Option(names = "--optimizer", paramLabel = "sgd|momentum|adam", description = "Update rule "
      + "of a zoo model (its option 'optimizer'; default: the model's, see 'lms4j models'); "
      + "adam adds two slots per weight, so the step holds optimizer state as real training "
      + "does.")
  String optimizer;

  @Option(names = {"-o", "--option"}, paramLabel = "KEY=VALUE",
      description = "Model option, e.g. -o image=32 (see 'lms4j models').")
  Map<String, String> options = new LinkedHashMap<>();

  /**
   * The training graph of either {@code --model} or {@code --graph}/{@code --manifest} (exactly
   * one of the two), for the commands that take both.
   */
  TrainingGraph buildOrLoad(java.nio.file.Path graph, java.nio.file.Path manifest)
      throws java.io.IOException {
    if ((model == null) == (graph == null)) {
      throw new IllegalArgumentException("give either --model NAME or --graph FILE.pb with "
          + "--manifest FILE.json");
    }
    if (model != null) {
      return build();
    }
    if (manifest == null) {
      throw new IllegalArgumentException("--graph needs --manifest FILE.json");
    }
    return load(graph, manifest);
  }

  /** Loads {@code --graph}/{@code --manifest}; zoo-only options such as --optimizer are refused. */
  TrainingGraph load(java.nio.file.Path graph, java.nio.file.Path manifest)
      throws java.io.IOException {
    if (optimizer != null) {
      throw new IllegalArgumentException("--optimizer applies to --model only: a --graph "
          + "holds its own updates");
    }
    return TrainingGraph.load(graph, manifest);
  }

  /** A short name for reports: the model's or the graph file's. */
  String label(java.nio.file.Path graph) {
    return model != null ? model : graph.getFileName().toString();
  }

  /** Builds the model's training graph; unknown names or options throw IllegalArgumentException. */
  TrainingGraph build() {
    if (model.startsWith(CORPUS)) {
      return corpus();
    }
    ModelSpec spec = ModelZoo.getOrThrow(model);
    int b = batch == null ? spec.defaultBatch() : batch;
    if (b < 1) {
      throw new IllegalArgumentException("--batch must be >= 1");
    }
    Map<String, String> o = options;
    if (optimizer != null) {
      String given = options.get("optimizer");
      if (given != null && !given.equals(optimizer)) {
        throw new IllegalArgumentException("--optimizer " + optimizer + " contradicts -o "
            + "optimizer=" + given);
      }
      o = new LinkedHashMap<>(options);
      o.put("optimizer", optimizer);
    }
    return spec.build(b, o);
  }

  /** A corpus family's graph: its size and seed from -o; --batch and --optimizer refused. */
  private TrainingGraph corpus() {
    Corpus.Family f = Corpus.getOrThrow(model.substring(CORPUS.length()));
    if (batch != null) {
      throw new IllegalArgumentException("--batch does not apply to " + model + ": a corpus "
          + "graph's batch comes with its size (-o size=small|test|bench)");
    }
    if (optimizer != null) {
      throw new IllegalArgumentException("--optimizer does not apply to " + model + ": each "
          + "corpus family has its own update (see 'lms4j models')");
    }
    Map<String, String> o = new LinkedHashMap<>(options);
    String size = o.remove("size");
    Corpus.Size sz;
    try {
      sz = size == null ? Corpus.Size.BENCH
          : Corpus.Size.valueOf(size.trim().toUpperCase(java.util.Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("-o size must be small, test or bench, not '" + size
          + "'");
    }
    String seed = o.remove("seed");
    long sd;
    try {
      sd = seed == null ? 42 : Long.parseLong(seed.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("-o seed must be a whole number, not '" + seed + "'");
    }
    if (!o.isEmpty()) {
      throw new IllegalArgumentException("unknown option" + (o.size() > 1 ? "s " : " ")
          + String.join(", ", o.keySet()) + " for " + model + " (a corpus graph takes size "
          + "and seed)");
    }
    return f.build(sz, sd);
  }
}
