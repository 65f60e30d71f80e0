package dev.lms4j.checkpoint;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Set;

/**
 * Provides the {@code files} backend: raw tensor files written in parallel, a JSON manifest with
 * a CRC32C per tensor, fsync, atomic publication and keep-last-N.
 *
 * <p>Parameters ({@code key=value,...} or JSON, see {@link BackendParams}):
 * <ul>
 *   <li>{@code dir} (required): the root directory; checkpoints are {@code dir/ckpt-<step>/}
 *       holding {@code manifest.json} and {@code t00000.bin}, ...</li>
 *   <li>{@code keep} (default 5): how many complete checkpoints to keep, 0 = all (enforced after
 *       each save and when the backend is opened)</li>
 *   <li>{@code threads} (default 4): writer/reader threads (mostly waiting on I/O)</li>
 *   <li>{@code fsync} (default true): fsync files and directories (false only for tests and
 *       benchmarks of the page cache: a crash of the machine may then lose checkpoints)</li>
 * </ul>
 * Loading verifies each file's size and CRC32C and refuses a corrupted or truncated checkpoint
 * with a {@link CorruptCheckpointException} naming the tensor and the file. Opening a root removes
 * what a crashed writer left behind; one writer per root.
 *
 * <pre>{@code
 * CheckpointBackend b = CheckpointBackends.open("files", "dir=/data/ckpt,keep=3,threads=4");
 * }</pre>
 */
public final class FilesBackendProvider implements CheckpointBackendProvider {
  private static final Set<String> KEYS = Set.of("dir", "keep", "threads", "fsync");

  /** The provider (for {@link java.util.ServiceLoader}). */
  public FilesBackendProvider() {}

  /** {@code files}. */
  @Override
  public String name() {
    return FilesBackend.NAME;
  }

  /**
   * A {@code files} backend on {@code params}.
   *
   * @throws IllegalArgumentException for invalid parameters
   * @throws UncheckedIOException when the directory cannot be created or cleaned
   */
  @Override
  public CheckpointBackend create(String params) {
    BackendParams p = BackendParams.parse(name(), params, KEYS);
    try {
      return new FilesBackend(p.path("dir"), p.intValue("keep", 5, 0),
          p.intValue("threads", 4, 1), p.bool("fsync", true));
    } catch (IOException e) {
      throw new UncheckedIOException("files backend: cannot open " + p.get("dir") + ": "
          + e.getMessage(), e);
    }
  }
}
