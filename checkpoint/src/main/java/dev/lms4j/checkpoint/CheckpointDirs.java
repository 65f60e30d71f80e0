package dev.lms4j.checkpoint;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The crash-safe directory protocol shared by the {@code files} and {@code tf} backends.
 *
 * <p>A checkpoint is written into {@code root/.tmp-ckpt-<step>-<uuid>/}, every file is fsynced,
 * the directory is fsynced, then it is renamed (atomically, {@code rename(2)}) to
 * {@code root/ckpt-<step, 10 digits>/} and {@code root} is fsynced. Only names matching
 * {@code ckpt-<digits>} are ever listed, so a crash at any moment leaves either the old set of
 * complete checkpoints or the new one. Deletion (keep-last-N, replacement) first renames a
 * checkpoint out of the listed names ({@code .del-...}) and only then removes its files, so a
 * half-deleted checkpoint is never listed either. Leftover dot-directories are removed when a
 * backend opens the root (one writer per root is assumed).
 */
final class CheckpointDirs {
  private static final Logger LOG = LoggerFactory.getLogger(CheckpointDirs.class);
  private static final Pattern COMPLETE = Pattern.compile("ckpt-(\\d{1,19})");
  private static final Pattern OLD = Pattern.compile("\\.old-(ckpt-\\d{1,19})-.*");

  private CheckpointDirs() {}

  /** The final directory name of a step. */
  static String dirName(long step) {
    return String.format(Locale.ROOT, "ckpt-%010d", step);
  }

  /** The step of a complete checkpoint directory name, or -1. */
  static long stepOf(String name) {
    Matcher m = COMPLETE.matcher(name);
    if (!m.matches()) {
      return -1;
    }
    try {
      return Long.parseLong(m.group(1));
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** The complete checkpoint directories under root, by ascending step. */
  static List<Path> complete(Path root) throws IOException {
    List<Path> out = new ArrayList<>();
    if (!Files.isDirectory(root)) {
      return out;
    }
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(root)) {
      for (Path p : ds) {
        if (stepOf(p.getFileName().toString()) >= 0 && Files.isDirectory(p)) {
          out.add(p);
        }
      }
    }
    out.sort(Comparator.comparingLong((Path p) -> stepOf(p.getFileName().toString()))
        .thenComparing(p -> p.getFileName().toString()));
    return out;
  }

  /**
   * As {@link #open(Path)}, then keeps the newest {@code keep} complete checkpoints (0: all): a
   * writer killed between publishing a checkpoint and removing the oldest leaves one too many,
   * and without this a second such kill in the next writer's first save left two (five of a
   * keep-last-3 directory, seen in {@code CrashSafetyTest}).
   */
  static void open(Path root, int keep) throws IOException {
    open(root);
    for (Path p : prune(root, keep)) {
      LOG.info("removed old checkpoint {} (keep-last-{})", p, keep);
    }
  }

  /** Creates root if needed and removes what an interrupted writer left behind. */
  private static void open(Path root) throws IOException {
    Files.createDirectories(root);
    List<Path> leftovers = new ArrayList<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(root, ".{tmp,del,old}-*")) {
      ds.forEach(leftovers::add);
    }
    leftovers.sort(Comparator.naturalOrder());
    for (Path p : leftovers) {
      Matcher m = OLD.matcher(p.getFileName().toString());
      if (m.matches() && !Files.exists(root.resolve(m.group(1)))) {
        // crashed between "move the old one aside" and "move the new one in": restore the old
        Files.move(p, root.resolve(m.group(1)), StandardCopyOption.ATOMIC_MOVE);
        fsyncDir(root);
        LOG.warn("restored checkpoint {} that a crashed replacement had moved aside", m.group(1));
        continue;
      }
      LOG.info("removing incomplete checkpoint leftover {}", p);
      deleteTree(p);
    }
  }

  /** A new, empty temporary directory for the checkpoint of {@code step}. */
  static Path newTemp(Path root, long step) throws IOException {
    Path tmp = root.resolve(".tmp-" + dirName(step) + "-" + UUID.randomUUID());
    Files.createDirectory(tmp);
    return tmp;
  }

  /**
   * Publishes a fully written (and fsynced) temporary directory as the checkpoint of
   * {@code step}, replacing an existing one of the same step.
   */
  static Path commit(Path root, Path tmp, long step) throws IOException {
    fsyncDir(tmp);
    Path dest = root.resolve(dirName(step));
    Path old = null;
    if (Files.exists(dest)) {
      old = root.resolve(".old-" + dirName(step) + "-" + UUID.randomUUID());
      move(dest, old);
    }
    move(tmp, dest);
    fsyncDir(root);
    if (old != null) {
      deleteTree(old);
    }
    return dest;
  }

  /** Deletes the oldest complete checkpoints so that at most {@code keep} remain (0: keep all). */
  static List<Path> prune(Path root, int keep) throws IOException {
    List<Path> removed = new ArrayList<>();
    if (keep <= 0) {
      return removed;
    }
    List<Path> all = complete(root);
    for (int i = 0; i < all.size() - keep; i++) {
      Path p = all.get(i);
      Path trash = root.resolve(".del-" + p.getFileName() + "-" + UUID.randomUUID());
      move(p, trash);
      removed.add(p);
    }
    if (!removed.isEmpty()) {
      fsyncDir(root);
      for (Path p : removed) {
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(root,
            ".del-" + p.getFileName() + "-*")) {
          for (Path t : ds) {
            deleteTree(t);
          }
        }
      }
    }
    return removed;
  }

  private static void move(Path from, Path to) throws IOException {
    try {
      Files.move(from, to, StandardCopyOption.ATOMIC_MOVE);
    } catch (AtomicMoveNotSupportedException e) {
      throw new IOException("the file system of " + from.getParent()
          + " cannot rename atomically; checkpoints need a local POSIX file system", e);
    }
  }

  /** fsync of a regular file. */
  static void fsync(Path file) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      ch.force(true);
    }
  }

  /** fsync of a directory (its entries), as POSIX needs after create/rename. */
  static void fsyncDir(Path dir) throws IOException {
    try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
      ch.force(true);
    } catch (IOException e) {
      // some file systems refuse to open directories for fsync; the rename is still atomic
      LOG.debug("fsync of directory {} not supported: {}", dir, e.toString());
    }
  }

  /** Removes a directory tree; a missing tree is fine. */
  static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    Files.walkFileTree(dir, new SimpleFileVisitor<>() {
      @Override
      public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
        Files.deleteIfExists(file);
        return FileVisitResult.CONTINUE;
      }

      @Override
      public FileVisitResult visitFileFailed(Path file, IOException exc) throws IOException {
        if (exc instanceof NoSuchFileException) {
          return FileVisitResult.CONTINUE;
        }
        throw exc;
      }

      @Override
      public FileVisitResult postVisitDirectory(Path d, IOException exc) throws IOException {
        Files.deleteIfExists(d);
        return FileVisitResult.CONTINUE;
      }
    });
  }
}
