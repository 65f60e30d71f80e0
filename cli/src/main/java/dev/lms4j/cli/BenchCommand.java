package dev.lms4j.cli;

import dev.lms4j.bench.CheckpointBench;
import dev.lms4j.bench.NativeSwapBench;
import dev.lms4j.bench.SwapBench;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code lms4j bench}: the benchmark suite. */
@Command(name = "bench", mixinStandardHelpOptions = true,
    description = "Run the benchmark suite: smallest budget with and without LMS (bisection) "
        + "for swap, remat and auto, step time at half the no-LMS budget vs unbudgeted, "
        + "predicted vs measured peak, planning time at 10k and 100k ops; checkpoint save and "
        + "restore throughput (files, tf, dd) and asynchronous checkpoint overhead. Writes JSON "
        + "and Markdown.")
final class BenchCommand implements Callable<Integer> {
  @Option(names = "--suite", defaultValue = "quick",
      description = "quick (default), full, or native (the native swap path only).")
  String suite;

  @Option(names = "--out", defaultValue = "docs/bench", description = "Output directory "
      + "(default ${DEFAULT-VALUE}).")
  Path out;

  @Override
  public Integer call() throws Exception {
    if (suite.equals("native")) {
      NativeSwapBench.run(out, System.out);
      return 0;
    }
    if (!suite.equals("quick") && !suite.equals("full")) {
      throw new IllegalArgumentException("--suite must be quick, full or native");
    }
    SwapBench.run(suite, out, System.out);
    // ~1 GiB of variables as the checkpoint issue asks; the full suite uses 4 GiB
    CheckpointBench.run(suite.equals("quick") ? 1L << 30 : 4L << 30, out, System.out);
    return 0;
  }
}
