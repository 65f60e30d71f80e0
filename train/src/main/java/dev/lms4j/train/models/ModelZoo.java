package dev.lms4j.train.models;

import java.util.List;
import java.util.Optional;

/**
 * The registry of built-in models: {@code mlp}, {@code resnet} and {@code lenet} (small models
 * for tests and demos), and the published architectures {@code resnet18}, {@code resnet50},
 * {@code resnet101}, {@code vgg16}, {@code unet3d} and {@code gpt2} (small by default; their
 * published sizes are option sets, see docs/models.md).
 *
 * <pre>{@code
 * TrainingGraph tg = ModelZoo.getOrThrow("lenet").build(100, Map.of("dense", "512"));
 * }</pre>
 */
public final class ModelZoo {

  private static final List<ModelSpec> ALL = List.of(new MlpModel(), new ResNetModel(),
      new LeNetModel(), ResNetV1Model.resnet18(), ResNetV1Model.resnet50(),
      ResNetV1Model.resnet101(), new Vgg16Model(), new UNet3dModel(), new Gpt2Model());

  private ModelZoo() {}

  /**
   * All models.
   *
   * @return the models, in a stable order
   */
  public static List<ModelSpec> all() {
    return ALL;
  }

  /**
   * Looks a model up by name.
   *
   * @param name the model name (exact match)
   * @return the model, or empty when there is none by that name
   */
  public static Optional<ModelSpec> get(String name) {
    return ALL.stream().filter(m -> m.name().equals(name)).findFirst();
  }

  /**
   * Looks a model up by name, failing clearly when it is unknown.
   *
   * @param name the model name (exact match)
   * @return the model
   * @throws IllegalArgumentException naming the known models when there is none by that name
   */
  public static ModelSpec getOrThrow(String name) {
    return get(name).orElseThrow(() -> new IllegalArgumentException("unknown model '" + name
        + "' (known models: " + String.join(", ", ALL.stream().map(ModelSpec::name).toList())
        + ")"));
  }
}
