package dev.lms4j.checkpoint;

import java.io.IOException;

/**
 * A checkpoint failed verification: a checksum or size mismatch, a truncated or missing file, an
 * unreadable manifest. The message names the checkpoint, the tensor and the file.
 *
 * <pre>{@code
 * try {
 *   backend.load(info, targets);
 * } catch (CorruptCheckpointException e) {
 *   // fall back to an older checkpoint
 * }
 * }</pre>
 */
public final class CorruptCheckpointException extends IOException {
  private static final long serialVersionUID = 1L;

  /** An exception with a message naming what is corrupted. */
  public CorruptCheckpointException(String message) {
    super(message);
  }
}
