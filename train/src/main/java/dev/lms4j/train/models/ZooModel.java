package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Base of the zoo's models: name, description, documented option defaults, and the checks every
 * {@link #build} makes (batch size, option names and values) before {@link #graph} builds.
 *
 * <p>Every model takes the options {@code seed}, {@code lr} and {@code optimizer}
 * ({@code sgd}, {@code momentum} or {@code adam}; {@code momentum} by default where the model
 * declares a {@code momentum} option, else {@code sgd}); {@link #builder} reads them, so a
 * model's {@link #graph} starts with {@code try (GraphBuilder b = builder(o)) { ... }} and ends
 * with {@code b.finish(...)}.
 */
abstract class ZooModel implements ModelSpec {
  /** The option naming the update rule. */
  static final String OPTIMIZER = "optimizer";
  private static final String MOMENTUM = "momentum";
  /** The momentum of {@code optimizer=momentum} for models without a {@code momentum} option. */
  static final float DEFAULT_MOMENTUM = 0.9f;

  private final String name;
  private final String description;
  private final Map<String, String> defaults;

  /**
   * @param name        the zoo name
   * @param description one line for {@code lms4j models}
   * @param defaults    option keys and defaults, alternating ("layers", "8", ...)
   */
  ZooModel(String name, String description, String... defaults) {
    this.name = name;
    this.description = description;
    Map<String, String> d = new LinkedHashMap<>();
    for (int i = 0; i < defaults.length; i += 2) {
      d.put(defaults[i], defaults[i + 1]);
    }
    if (!d.containsKey("lr") || !d.containsKey("seed")) {
      throw new IllegalArgumentException(name + ": every zoo model has options lr and seed");
    }
    d.put(OPTIMIZER, (d.containsKey(MOMENTUM) ? GraphBuilder.Kind.MOMENTUM
        : GraphBuilder.Kind.SGD).optionName());
    this.defaults = Collections.unmodifiableMap(d);
  }

  @Override
  public final String name() {
    return name;
  }

  @Override
  public final String description() {
    return description;
  }

  @Override
  public int defaultBatch() {
    return 32;
  }

  @Override
  public final Map<String, String> defaultOptions() {
    return defaults;
  }

  @Override
  public final TrainingGraph build(int batch, Map<String, String> options) {
    Options.checkBatch(name, batch);
    return graph(batch, Options.parse(name, defaults, options));
  }

  /**
   * The graph builder of one build: seeded with option {@code seed}, updating with option
   * {@code optimizer} at step size {@code lr} (and {@code momentum}, where the model has it).
   *
   * @param o the checked options
   * @return a new builder, to be closed
   */
  static GraphBuilder builder(Options o) {
    return new GraphBuilder(o.longValue("seed"), optimizer(o));
  }

  /** The update rule the options ask for. */
  static GraphBuilder.Optimizer optimizer(Options o) {
    String[] names = java.util.Arrays.stream(GraphBuilder.Kind.values())
        .map(GraphBuilder.Kind::optionName).toArray(String[]::new);
    GraphBuilder.Kind kind = GraphBuilder.Kind.valueOf(
        o.choice(OPTIMIZER, names).toUpperCase(java.util.Locale.ROOT));
    // momentum 0 is plain SGD (ApplyGradientDescent, no accumulators)
    float momentum = o.has(MOMENTUM) ? o.floatInRange(MOMENTUM, 0f, 1f) : DEFAULT_MOMENTUM;
    if (kind == GraphBuilder.Kind.MOMENTUM && momentum == 0f) {
      kind = GraphBuilder.Kind.SGD;
    }
    return new GraphBuilder.Optimizer(kind, o.positiveFloat("lr"), momentum);
  }

  /** Builds the training graph from checked options. */
  abstract TrainingGraph graph(int batch, Options o);
}
