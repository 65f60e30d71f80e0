package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Base of the zoo's models: name, description, documented option defaults, and the checks every
 * {@link #build} makes (batch size, option names and values) before {@link #graph} builds.
 */
abstract class ZooModel implements ModelSpec {
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

  /** Builds the training graph from checked options. */
  abstract TrainingGraph graph(int batch, Options o);
}
