package dev.lms4j.cli;

import dev.lms4j.core.report.Report;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Report file handling shared by the commands. */
final class Reports {
  private Reports() {}

  /** Fails early (bad input) when the report's directory does not exist. */
  static void checkWritable(Path file) {
    if (file == null) {
      return;
    }
    Path dir = file.toAbsolutePath().getParent();
    if (dir == null || !Files.isDirectory(dir)) {
      throw new IllegalArgumentException("cannot write " + file + ": no such directory " + dir);
    }
    if (Files.isDirectory(file)) {
      throw new IllegalArgumentException("cannot write " + file + ": it is a directory");
    }
  }

  /** Writes the report when a file was asked for. */
  static void write(Report r, Path file) throws IOException {
    if (file != null) {
      r.write(file);
      System.out.println("Report: " + file);
    }
  }
}
