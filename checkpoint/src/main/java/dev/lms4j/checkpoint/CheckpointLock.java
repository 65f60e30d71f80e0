package dev.lms4j.checkpoint;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * One writer per checkpoint directory: an exclusive lock on {@code DIR/.lms4j-writer.lock}
 * ({@link FileChannel#tryLock}, released by the operating system when the process dies, so a
 * killed writer never leaves a stale lock). A second training that would write to the same
 * directory is refused instead of deleting the first one's checkpoint in progress. The file
 * holds the owner's pid, for the message.
 *
 * <pre>{@code
 * try (CheckpointLock lock = CheckpointLock.acquire(dir)) {
 *   ... train and checkpoint into dir ...
 * }
 * }</pre>
 */
public final class CheckpointLock implements AutoCloseable {
  /** The lock file's name inside the checkpoint directory. */
  public static final String FILE = ".lms4j-writer.lock";

  private final FileChannel channel;
  private final FileLock lock;

  private CheckpointLock(FileChannel channel, FileLock lock) {
    this.channel = channel;
    this.lock = lock;
  }

  /**
   * Takes the writer's lock of {@code dir}, creating the directory if needed.
   *
   * @param dir the checkpoint directory
   * @return the lock; close it when done writing
   * @throws IllegalStateException when another process (or another writer in this JVM) holds it
   * @throws IOException           when the lock file cannot be created
   */
  public static CheckpointLock acquire(Path dir) throws IOException {
    Files.createDirectories(dir);
    Path file = dir.resolve(FILE);
    FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
        StandardOpenOption.WRITE);
    FileLock l;
    try {
      l = ch.tryLock();
    } catch (OverlappingFileLockException e) {
      l = null;
    } catch (IOException | RuntimeException e) {
      ch.close();
      throw e;
    }
    if (l == null) {
      String owner = owner(ch);
      ch.close();
      throw new IllegalStateException("another training is writing checkpoints to " + dir
          + (owner.isEmpty() ? "" : " (process " + owner + ")") + "; give another "
          + "--checkpoint-dir or wait for it to end");
    }
    ch.truncate(0);
    ch.write(ByteBuffer.wrap(Long.toString(ProcessHandle.current().pid())
        .getBytes(StandardCharsets.US_ASCII)), 0);
    ch.force(false);
    return new CheckpointLock(ch, l);
  }

  /**
   * Fails like {@link #acquire} when another writer holds the lock of {@code dir}; otherwise
   * returns at once, holding nothing. A directory that does not exist is free, and is not
   * created.
   *
   * @param dir the checkpoint directory
   * @throws IllegalStateException when another writer holds it
   * @throws IOException           when the lock file cannot be opened
   */
  public static void checkFree(Path dir) throws IOException {
    if (Files.isRegularFile(dir.resolve(FILE))) {
      acquire(dir).close();
    }
  }

  private static String owner(FileChannel ch) {
    try {
      ByteBuffer b = ByteBuffer.allocate(32);
      int n = ch.read(b, 0);
      return n <= 0 ? "" : new String(b.array(), 0, n, StandardCharsets.US_ASCII).trim();
    } catch (IOException e) {
      return "";
    }
  }

  /** Releases the lock; idempotent. The file stays (removing it would race a new writer). */
  @Override
  public void close() throws IOException {
    if (channel.isOpen()) {
      try {
        lock.release();
      } finally {
        channel.close();
      }
    }
  }
}
