package dev.lms4j.cli;

import java.nio.file.Path;
import picocli.CommandLine.Option;

/** {@code --plot FILE.svg|png}, which this version refuses with a clear message. */
final class PlotOption {
  @Option(names = "--plot", paramLabel = "FILE.svg",
      description = "Not available yet (plots come with the benchmark and reports issue).")
  Path plot;

  /** Throws IllegalArgumentException when a plot was asked for. */
  void check() {
    if (plot != null) {
      throw new IllegalArgumentException("--plot is not available in this version of lms4j");
    }
  }
}
