package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import java.util.Map;

/**
 * A model of the zoo: a named recipe that builds a complete training graph (forward pass, loss,
 * accuracy, gradients and an SGD update) together with the {@link dev.lms4j.tf.Manifest} that
 * says how to run it.
 *
 * <pre>{@code
 * ModelSpec spec = ModelZoo.getOrThrow("mlp");
 * TrainingGraph tg = spec.build(spec.defaultBatch(), Map.of("layers", "4"));
 * }</pre>
 *
 * <p>Every graph built by a spec follows the same contract:
 *
 * <ul>
 *   <li>feeds: placeholder {@code x} (float32, full static shape {@code [batch, ...]}, fill
 *       {@code normal}) and placeholder {@code labels} (float32 {@code [batch, classes]}, fill
 *       {@code onehot});
 *   <li>loss tensor {@code loss:0}: the batch mean of the softmax cross entropy;
 *   <li>metric {@code accuracy} (manifest {@code "metrics": {"accuracy": "accuracy:0"}}): the
 *       batch mean of {@code argmax(logits) == argmax(labels)}, a float32 scalar;
 *   <li>op {@code init}: a NoOp depending on one seeded Assign per (reference) variable,
 *       optimizer slots included;
 *   <li>op {@code train_op}: a NoOp depending on one update per trainable variable, by option
 *       {@code optimizer}: {@code ApplyGradientDescent} ({@code sgd}), {@code ApplyMomentum}
 *       ({@code momentum}; accumulators are variables {@code train/<variable>_momentum}) or
 *       {@code ApplyAdam} ({@code adam}; slots {@code train/<variable>_m} and {@code _v}, and
 *       {@code train/beta1_power}, {@code train/beta2_power} advanced after every update);
 *       updates live under the name scope {@code train/}, gradients under {@code gradients/};
 *   <li>determinism: the same arguments always give an identical GraphDef.
 * </ul>
 */
public interface ModelSpec {

  /**
   * The zoo name of the model.
   *
   * @return the name, e.g. {@code mlp}
   */
  String name();

  /**
   * A one-line human readable description.
   *
   * @return the description
   */
  String description();

  /**
   * The batch size used when the caller does not choose one.
   *
   * @return the default batch size, at least 1
   */
  int defaultBatch();

  /**
   * The option keys this model understands, each mapped to its default value (as text), in a
   * stable, documented order. {@link #build} accepts any subset of these keys.
   *
   * @return an unmodifiable map from option key to default value
   */
  Map<String, String> defaultOptions();

  /**
   * Builds the training graph.
   *
   * @param batch   batch size, at least 1 (part of every static shape)
   * @param options option overrides; keys must come from {@link #defaultOptions()}; may be empty
   *                or null
   * @return the GraphDef and its manifest
   * @throws IllegalArgumentException for a bad batch size, an unknown option key or a bad value
   */
  TrainingGraph build(int batch, Map<String, String> options);
}
