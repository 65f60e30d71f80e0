package dev.lms4j.tf;

/** {@link AdamNet}'s graphs for tests in other packages. */
public final class AdamNetAccess {
  private AdamNetAccess() {}

  /** {@link AdamNet#build}: a small CNN trained with the framework's Adam. */
  public static TrainingGraph cnn(int batch, int image, int width, int dense) {
    return AdamNet.build(batch, image, width, dense);
  }
}
