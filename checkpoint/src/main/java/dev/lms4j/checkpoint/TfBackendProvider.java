package dev.lms4j.checkpoint;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Set;

/**
 * Provides the {@code tf} backend: TensorFlow's checkpoint format (tensor bundle, {@code SaveV2}
 * / {@code RestoreV2}), so TensorFlow reads what lms4j writes and lms4j reads what TensorFlow
 * writes. Each checkpoint is {@code dir/ckpt-<step>/model.index} + {@code model.data-00000-of-00001}
 * + {@code lms4j.json} (step, metadata, tensor specs), published atomically like the
 * {@code files} backend's; {@code dir/checkpoint} is TensorFlow's state file, so
 * {@code tf.train.latest_checkpoint(dir)} finds the newest. Bundles TensorFlow wrote directly
 * into {@code dir} ({@code dir/model.ckpt-1000.index}) are listed too, their step taken from the
 * {@code -<digits>} suffix (0 without one).
 *
 * <p>Parameters: {@code dir} (required), {@code keep} (default 5, 0 = all), {@code prefix}
 * (default {@code model}), {@code fsync} (default true).
 *
 * <pre>{@code
 * CheckpointBackend b = CheckpointBackends.open("tf", "dir=/data/tf-ckpt,keep=2");
 * }</pre>
 */
public final class TfBackendProvider implements CheckpointBackendProvider {
  private static final Set<String> KEYS = Set.of("dir", "keep", "prefix", "fsync");

  /** The provider (for {@link java.util.ServiceLoader}). */
  public TfBackendProvider() {}

  /** {@code tf}. */
  @Override
  public String name() {
    return TfBackend.NAME;
  }

  /**
   * A {@code tf} backend on {@code params}.
   *
   * @throws IllegalArgumentException for invalid parameters
   * @throws UncheckedIOException when the directory cannot be created or cleaned
   */
  @Override
  public CheckpointBackend create(String params) {
    BackendParams p = BackendParams.parse(name(), params, KEYS);
    String prefix = p.string("prefix", "model");
    if (!prefix.matches("[A-Za-z0-9_][A-Za-z0-9_.-]*")) {
      throw new IllegalArgumentException("backend 'tf': parameter 'prefix' must be a plain file "
          + "name (letters, digits, _ . -), got '" + prefix + "'");
    }
    try {
      return new TfBackend(p.path("dir"), p.intValue("keep", 5, 0), prefix, p.bool("fsync", true));
    } catch (IOException e) {
      throw new UncheckedIOException("tf backend: cannot open " + p.get("dir") + ": "
          + e.getMessage(), e);
    }
  }
}
