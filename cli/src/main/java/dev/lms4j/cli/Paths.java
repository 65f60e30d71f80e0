package dev.lms4j.cli;

import java.nio.file.Files;
import java.nio.file.Path;

/** Checks of directory options, made before anything runs. */
final class Paths {
  private Paths() {}

  /**
   * Fails (bad input) when {@code dir} exists but is not a writable directory, or does not exist
   * and cannot be created because its nearest existing ancestor is not a writable directory.
   * Nothing is created.
   */
  static void checkDirectory(Path dir, String option) {
    Path abs = dir.toAbsolutePath().normalize();
    if (Files.exists(abs)) {
      if (!Files.isDirectory(abs)) {
        throw new IllegalArgumentException(option + " " + dir + " is a file, not a directory");
      }
      if (!Files.isWritable(abs)) {
        throw new IllegalArgumentException(option + " " + dir + " is not writable");
      }
      return;
    }
    Path p = abs.getParent();
    while (p != null && !Files.exists(p)) {
      p = p.getParent();
    }
    if (p == null || !Files.isDirectory(p)) {
      throw new IllegalArgumentException(option + " " + dir + " cannot be created: " + p
          + " is not a directory");
    }
    if (!Files.isWritable(p)) {
      throw new IllegalArgumentException(option + " " + dir + " cannot be created: " + p
          + " is not writable");
    }
  }
}
