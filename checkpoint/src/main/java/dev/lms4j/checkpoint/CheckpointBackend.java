package dev.lms4j.checkpoint;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Writes and reads checkpoints of named tensors given as {@link TensorView}s (direct access to
 * the tensors' memory). Backends are found by name through {@link CheckpointBackends} and built
 * from a parameter string by their {@link CheckpointBackendProvider}.
 *
 * <p>A backend may hold threads, sessions or open files: it must be closed, and {@code close()}
 * is idempotent. A backend is used by one thread at a time unless it says otherwise.
 *
 * <pre>{@code
 * try (CheckpointBackend b = CheckpointBackends.open("files", "dir=/tmp/ckpt,keep=3")) {
 *   CheckpointInfo saved = b.save(100, Map.of("loss", "0.25"), views);
 *   b.load(b.latest().orElseThrow(), targets);   // fills the targets' memory
 * }
 * }</pre>
 */
public interface CheckpointBackend extends AutoCloseable {

  /** The name this backend is registered under, e.g. {@code files}. */
  String name();

  /**
   * Writes one checkpoint of {@code tensors} taken at {@code step}. When this returns, the
   * checkpoint is complete (and, for durable backends, on disk); a checkpoint interrupted by a
   * crash is never listed. Tensor names must be unique. The views are read, not kept.
   *
   * @param step the training step (>= 0)
   * @param metadata free-form key/value pairs stored with it
   * @param tensors the tensors, in a deterministic order (kept in the checkpoint)
   * @return the checkpoint written
   * @throws IOException when writing fails (the previous checkpoints stay intact)
   */
  CheckpointInfo save(long step, Map<String, String> metadata, List<TensorView> tensors)
      throws IOException;

  /**
   * Fills every target with the tensor of the same name from {@code checkpoint}, writing into
   * the target's memory. Dtype and shape must match. When this throws, some targets may have
   * been written already ({@link Checkpoints#load} assigns nothing to the variables then).
   *
   * @throws IOException when the checkpoint cannot be read, lacks a tensor, or is corrupted
   *     ({@link CorruptCheckpointException})
   * @throws IllegalArgumentException when a target's dtype or shape differs from the stored one
   * @throws UnsupportedOperationException when this backend cannot load (e.g. {@code log})
   */
  void load(CheckpointInfo checkpoint, List<TensorView> targets) throws IOException;

  /**
   * The complete checkpoints this backend can load, by ascending step (ties by location). Empty
   * for write-only backends.
   */
  List<CheckpointInfo> list() throws IOException;

  /** The complete checkpoint with the highest step, if any. */
  default Optional<CheckpointInfo> latest() throws IOException {
    List<CheckpointInfo> all = list();
    return all.isEmpty() ? Optional.empty() : Optional.of(all.get(all.size() - 1));
  }

  /** Releases the backend's resources; idempotent. */
  @Override
  void close() throws IOException;
}
