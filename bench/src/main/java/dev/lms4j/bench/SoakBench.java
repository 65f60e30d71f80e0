package dev.lms4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.models.ModelZoo;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * The soak benchmark (issue 17): a long budgeted run with LMS swapping, per tier (host memory
 * and disk), with the worker JVM's resident set sampled as it trains.
 *
 * <p>What it shows: after a warm-up the worker's RSS stays flat (no leak per step: the slope of
 * a least-squares line through the samples after the warm-up, in MiB per 1000 steps and per
 * minute), and the disk tier's swap files go back to zero bytes (each file is truncated once its
 * last swap-in has read it): their total size is sampled with the RSS and checked once more after
 * the run. Sampling happens in this process while the worker goes on with the next step, so a
 * sample can catch a step's swap files in flight; the count of samples at zero bytes says how
 * often that happened.
 *
 * <p>The graph: the zoo's mlp (6 x 512) at batch 1024, under 32 MiB with {@code tflms} (swap
 * only), where it runs out of memory without LMS (predicted peak 35.7 MiB). Writes
 * {@code soak.json} and {@code soak.md} under the output directory.
 */
public final class SoakBench {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, String> OPTIONS = Map.of("layers", "6", "width", "512");
  private static final int BATCH = 1024;
  private static final long BUDGET = 32L << 20;
  private static final int SAMPLE_EVERY = 10;
  /** The end of the run whose growth shows whether RSS has levelled off. */
  private static final int TAIL_STEPS = 300;

  private SoakBench() {}

  /**
   * Runs the soak on both tiers.
   *
   * @param outDir where soak.json and soak.md go
   * @param steps  steps per tier (the issue asks for 1000)
   * @param warmup steps left out of the RSS slope
   * @param out    progress
   * @return the JSON written
   * @throws IOException when a run cannot start or a result cannot be written
   */
  public static ObjectNode run(Path outDir, int steps, int warmup, PrintStream out)
      throws IOException {
    if (steps <= warmup + 2 * SAMPLE_EVERY) {
      throw new IllegalArgumentException("steps must exceed the warm-up (" + warmup
          + ") by at least " + 2 * SAMPLE_EVERY);
    }
    long t0 = System.nanoTime();
    ObjectNode root = JSON.createObjectNode();
    root.put("schema", "lms4j-bench/1").put("suite", "soak").put("machine", Machine.describe())
        .put("date", Instant.now().toString()).put("model", "mlp").put("options",
            OPTIONS.toString()).put("batch", BATCH).put("budget_bytes", BUDGET)
        .put("mode", LmsMode.TFLMS.cliName()).put("steps", steps).put("warmup_steps", warmup)
        .put("load_average_start", loadAverage());
    ArrayNode rows = root.putArray("tiers");
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(BATCH, OPTIONS);
    // the reference first: the same graph and steps without LMS and without a budget, so a
    // slope that plain TensorFlow (and the JVM) shows is not blamed on LMS
    for (Tier tier : new Tier[] {null, Tier.HOST, Tier.DISK}) {
      rows.add(tier(tg, tier, steps, warmup, out));
    }
    root.put("load_average_end", loadAverage())
        .put("minutes", (System.nanoTime() - t0) / 6e10);
    Files.createDirectories(outDir);
    Files.writeString(outDir.resolve("soak.json"),
        JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    Files.writeString(outDir.resolve("soak.md"), markdown(root));
    out.println("Wrote " + outDir.resolve("soak.json") + " and soak.md");
    return root;
  }

  private static ObjectNode tier(TrainingGraph tg, Tier tier, int steps, int warmup,
      PrintStream out) throws IOException {
    Path swapDir = Files.createTempDirectory("lms4j-soak");
    ObjectNode row = JSON.createObjectNode().put("tier", tier == null ? "none (no LMS, no "
        + "budget)" : tier.name().toLowerCase(Locale.ROOT));
    try {
      TrainingGraph rewritten = tg;
      long budget = 0;
      int swapOuts = 0;
      if (tier != null) {
        LmsResult lr = Lms.builder().budget(BUDGET).mode(LmsMode.TFLMS)
            .params(SwapParams.defaults().toBuilder().tier(tier).build()).swapDir(swapDir)
            .build().rewrite(tg);
        swapOuts = lr.plan().swapOuts().size();
        row.put("swapped_bytes", lr.plan().swapOutBytes())
            .put("predicted_peak_bytes", lr.predictedPeakAfter());
        rewritten = new TrainingGraph(lr.graphDef(), tg.manifest());
        budget = BUDGET;
      }
      row.put("swap_outs", swapOuts).put("budget_bytes", budget);
      // step, minutes, RSS MiB, swap file bytes, then RSS MiB by kind: JIT code, anon, file
      List<double[]> samples = new ArrayList<>();
      long start = System.nanoTime();
      BudgetedRunner.Options base = BudgetedRunner.Options.of(budget, steps);
      BudgetedRunner.Options o = new BudgetedRunner.Options(budget, steps, base.seed(),
          base.deterministic(), base.memOpt(), Duration.ofMinutes(60));
      out.printf(Locale.ROOT, "== %s: %d steps of mlp (batch %d), %s, %d swap-outs ==%n",
          tier == null ? "reference" : tier + " tier", steps, BATCH,
          budget > 0 ? "under " + (budget >> 20) + " MiB" : "no budget", swapOuts);
      RunResult r = BudgetedRunner.run(rewritten, o, s -> {
        // the last step is not sampled: the worker then closes its session, and a sample taken
        // while it does reads memory on its way back (9 MiB lower in one run)
        if (s.step() % SAMPLE_EVERY != 0 || s.step() == steps) {
          return;
        }
        Optional<Resident> rss = worker().flatMap(SoakBench::resident);
        if (rss.isPresent()) {
          Resident m = rss.get();
          samples.add(new double[] {s.step(), (System.nanoTime() - start) / 6e10,
              m.totalKib() / 1024.0, swapBytes(swapDir), m.codeKib() / 1024.0,
              m.anonKib() / 1024.0, m.fileKib() / 1024.0});
        }
        if (s.step() % 100 == 0) {
          out.printf(Locale.ROOT, "  step %d: worker RSS %.1f MiB (JIT code %.1f), swap files "
                  + "%d bytes%n", s.step(), rss.map(k -> k.totalKib() / 1024.0)
                  .orElse(Double.NaN), rss.map(k -> k.codeKib() / 1024.0).orElse(Double.NaN),
              swapBytes(swapDir));
        }
      });
      row.put("fits", r.fits()).put("steps_run", r.steps().size());
      if (!r.fits()) {
        row.put("error", r.error());
        out.println("  failed: " + r.error());
        return row;
      }
      double[][] after = samples.stream().filter(x -> x[0] > warmup).toArray(double[][]::new);
      row.put("measured_peak_bytes", r.peakBytes()).put("median_ms_per_step", r.medianMs())
          .put("rss_samples", samples.size())
          .put("rss_first_after_warmup_mib", after.length > 0 ? after[0][2] : Double.NaN)
          .put("rss_last_mib", after.length > 0 ? after[after.length - 1][2] : Double.NaN)
          .put("rss_max_after_warmup_mib", Arrays.stream(after).mapToDouble(x -> x[2]).max()
              .orElse(Double.NaN))
          .put("rss_slope_mib_per_1000_steps", 1000 * slope(after, 0))
          .put("rss_slope_mib_per_minute", slope(after, 1))
          .put("rss_code_first_after_warmup_mib", after.length > 0 ? after[0][4] : Double.NaN)
          .put("rss_code_last_mib", after.length > 0 ? after[after.length - 1][4] : Double.NaN)
          .put("rss_slope_without_code_mib_per_1000_steps", 1000 * slope(withoutCode(after), 0));
      double lastStep = after.length > 0 ? after[after.length - 1][0] : 0;
      double[][] tail = Arrays.stream(after).filter(x -> x[0] >= lastStep - TAIL_STEPS)
          .toArray(double[][]::new);
      row.put("tail_steps", TAIL_STEPS)
          .put("rss_growth_tail_mib", growth(tail, 2))
          .put("rss_code_growth_tail_mib", growth(tail, 4));
      ObjectNode byKind = row.putObject("rss_slope_by_kind_mib_per_1000_steps");
      for (int k = 0; k < KINDS.length; k++) {
        byKind.put(KINDS[k], 1000 * slope(column(after, 4 + k), 0));
      }
      row
          .put("swap_file_bytes_max_sampled", samples.stream().mapToDouble(x -> x[3]).max()
              .orElse(0))
          .put("swap_file_samples_at_zero", samples.stream().filter(x -> x[3] == 0).count())
          .put("swap_file_bytes_after_run", swapBytes(swapDir))
          .put("swap_files_after_run", fileCount(swapDir));
      ArrayNode series = row.putArray("rss_series");
      for (double[] x : samples) {
        series.addArray().add((int) x[0]).add(Math.round(x[2] * 10) / 10.0).add((long) x[3])
            .add(Math.round(x[4] * 100) / 100.0).add(Math.round(x[5] * 10) / 10.0)
            .add(Math.round(x[6] * 10) / 10.0);
      }
      out.printf(Locale.ROOT, "  RSS after warm-up %.1f -> %.1f MiB, slope %.3f MiB per 1000 "
              + "steps (%.3f MiB/min), %.3f without JIT code (%.2f -> %.2f MiB); swap files "
              + "after the run: %d bytes in %d files%n",
          row.get("rss_first_after_warmup_mib").asDouble(), row.get("rss_last_mib").asDouble(),
          row.get("rss_slope_mib_per_1000_steps").asDouble(),
          row.get("rss_slope_mib_per_minute").asDouble(),
          row.get("rss_slope_without_code_mib_per_1000_steps").asDouble(),
          row.get("rss_code_first_after_warmup_mib").asDouble(),
          row.get("rss_code_last_mib").asDouble(),
          row.get("swap_file_bytes_after_run").asLong(), row.get("swap_files_after_run").asInt());
      return row;
    } finally {
      try (Stream<Path> s = Files.walk(swapDir)) {
        s.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
      }
    }
  }

  private static double loadAverage() {
    return java.lang.management.ManagementFactory.getOperatingSystemMXBean()
        .getSystemLoadAverage();
  }

  /** Least-squares slope of column 2 (RSS) over column {@code x}. */
  static double slope(double[][] pts, int x) {
    int n = pts.length;
    if (n < 2) {
      return Double.NaN;
    }
    double mx = 0;
    double my = 0;
    for (double[] p : pts) {
      mx += p[x] / n;
      my += p[2] / n;
    }
    double sxy = 0;
    double sxx = 0;
    for (double[] p : pts) {
      sxy += (p[x] - mx) * (p[2] - my);
      sxx += (p[x] - mx) * (p[x] - mx);
    }
    return sxx == 0 ? Double.NaN : sxy / sxx;
  }

  /** The budgeted worker JVM this process started (the one running the StepWorker). */
  private static Optional<ProcessHandle> worker() {
    return ProcessHandle.current().children().filter(ProcessHandle::isAlive)
        .filter(p -> cmdline(p).contains("StepWorker")).findFirst();
  }

  private static String cmdline(ProcessHandle p) {
    // ProcessHandle.Info.arguments() is empty for command lines over 4 KiB: read /proc
    try {
      return new String(Files.readAllBytes(Path.of("/proc", Long.toString(p.pid()),
          "cmdline")), StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  /**
   * A process's resident memory by kind, summed over its mappings in {@code /proc/PID/smaps}.
   *
   * @param codeKib anonymous executable mappings: JIT-compiled code (the JVM's code cache,
   *                kernels a native library generates at run time)
   * @param anonKib other anonymous mappings: the Java heap, malloc arenas, thread stacks,
   *                TensorFlow's allocator
   * @param fileKib file-backed mappings: the JVM, TensorFlow and other libraries, class data
   */
  record Resident(long codeKib, long anonKib, long fileKib) {
    long totalKib() {
      return codeKib + anonKib + fileKib;
    }
  }

  /** The kinds of {@link Resident}, in the order of the sample columns 4, 5, 6. */
  private static final String[] KINDS = {"jit_code", "anon", "file"};

  private static Optional<Resident> resident(ProcessHandle p) {
    try {
      return Optional.of(resident(Files.readAllLines(Path.of("/proc", Long.toString(p.pid()),
          "smaps"))));
    } catch (IOException | java.io.UncheckedIOException e) {
      return Optional.empty(); // the worker has ended
    }
  }

  /**
   * Sums the {@code Rss:} lines of a {@code /proc/PID/smaps} text by the kind of the mapping
   * they belong to: a path makes it file-backed; otherwise an {@code x} in its permissions
   * makes it code; everything else (also {@code [heap]} and {@code [stack]}) is anonymous.
   */
  static Resident resident(List<String> smaps) {
    long[] kib = new long[3];
    int kind = 1;
    for (String l : smaps) {
      String[] f = l.trim().split("\\s+");
      if (f.length >= 5 && f[0].matches("[0-9a-f]+-[0-9a-f]+")) {
        String path = f.length > 5 ? f[5] : "";
        kind = path.startsWith("/") ? 2 : f[1].indexOf('x') >= 0 ? 0 : 1;
      } else if (f.length >= 2 && f[0].equals("Rss:")) {
        kib[kind] += Long.parseLong(f[1]);
      }
    }
    return new Resident(kib[0], kib[1], kib[2]);
  }

  /** Column {@code c} of the last sample minus that of the first (NaN without samples). */
  static double growth(double[][] pts, int c) {
    return pts.length == 0 ? Double.NaN : pts[pts.length - 1][c] - pts[0][c];
  }

  /** The samples with column {@code c} as their RSS column (2), for {@link #slope}. */
  private static double[][] column(double[][] pts, int c) {
    return Arrays.stream(pts).map(p -> new double[] {p[0], p[1], p[c]}).toArray(double[][]::new);
  }

  /** The samples with RSS minus JIT code as their RSS column. */
  private static double[][] withoutCode(double[][] pts) {
    return Arrays.stream(pts).map(p -> new double[] {p[0], p[1], p[2] - p[4]})
        .toArray(double[][]::new);
  }

  private static long swapBytes(Path dir) {
    try (Stream<Path> s = Files.list(dir)) {
      return s.mapToLong(f -> f.toFile().length()).sum();
    } catch (IOException e) {
      return -1;
    }
  }

  private static int fileCount(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return (int) s.count();
    }
  }

  private static String markdown(ObjectNode root) {
    StringBuilder md = new StringBuilder("# Soak: a long budgeted run with LMS swapping\n\n");
    md.append(String.format(Locale.ROOT, "Command: `./lms4j bench --suite soak`; machine: %s; "
            + "%s; %.1f min; load average %.1f at the start, %.1f at the end.%n%n",
        root.get("machine").asText(), root.get("date").asText(), root.get("minutes").asDouble(),
        root.get("load_average_start").asDouble(), root.get("load_average_end").asDouble()));
    md.append(String.format(Locale.ROOT, "mlp (%s) at batch %d, %d steps per tier under a BFC "
            + "budget of %d MiB with `--lms %s` (it runs out of memory without LMS). The worker "
            + "JVM's RSS (the sum of `Rss` over `/proc/PID/smaps`) is sampled every %d steps "
            + "but the last (the worker is closing its session by then); the slope is a "
            + "least-squares line through the samples after the first %d steps. Swap-file bytes "
            + "are sampled at the same moments, after the RSS, while the worker runs the next "
            + "step.%n%n",
        root.get("options").asText(), root.get("batch").asInt(), root.get("steps").asInt(),
        root.get("budget_bytes").asLong() >> 20, root.get("mode").asText(), SAMPLE_EVERY,
        root.get("warmup_steps").asInt()));
    md.append("The first row is the reference: the same graph and steps without LMS and "
        + "without a budget; what it shows, LMS does not add.\n\n");
    md.append("| tier | fits | swap-outs | ms/step | RSS after warm-up -> last (MiB) | "
        + "slope MiB / 1000 steps | slope MiB / min | swap bytes: max sampled | samples at 0 "
        + "| after the run |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (var t : root.get("tiers")) {
      if (!t.get("fits").asBoolean()) {
        md.append("| ").append(t.get("tier").asText()).append(" | no: ")
            .append(t.path("error").asText()).append(" |||||||||\n");
        continue;
      }
      md.append(String.format(Locale.ROOT, "| %s | yes | %d | %.1f | %.1f -> %.1f | %.3f | "
              + "%.3f | %d | %d of %d | %d bytes in %d files |%n", t.get("tier").asText(),
          t.get("swap_outs").asInt(), t.get("median_ms_per_step").asDouble(),
          t.get("rss_first_after_warmup_mib").asDouble(), t.get("rss_last_mib").asDouble(),
          t.get("rss_slope_mib_per_1000_steps").asDouble(),
          t.get("rss_slope_mib_per_minute").asDouble(),
          t.get("swap_file_bytes_max_sampled").asLong(),
          t.get("swap_file_samples_at_zero").asInt(), t.get("rss_samples").asInt(),
          t.get("swap_file_bytes_after_run").asLong(), t.get("swap_files_after_run").asInt()));
    }
    md.append("\nWhere the slope comes from: each sample's RSS split by kind of mapping "
        + "(`/proc/PID/smaps`): JIT code is anonymous executable memory (the JVM's code cache "
        + "grows while methods that run once or a few times per step reach the JIT's "
        + "thresholds), anon is the rest of the anonymous memory (Java heap, malloc arenas, "
        + "TensorFlow's allocator, thread stacks), file is mapped libraries.\n\n");
    md.append(String.format(Locale.ROOT, "| tier | JIT code after warm-up -> last (MiB) | "
        + "slope MiB / 1000 steps: JIT code | anon | file | RSS without JIT code | growth over "
        + "the last %d steps (MiB): RSS | JIT code |%n|---|---|---|---|---|---|---|---|%n",
        TAIL_STEPS));
    for (var t : root.get("tiers")) {
      if (!t.get("fits").asBoolean()) {
        continue;
      }
      var k = t.get("rss_slope_by_kind_mib_per_1000_steps");
      md.append(String.format(Locale.ROOT, "| %s | %.2f -> %.2f | %.3f | %.3f | %.3f | %.3f | "
              + "%.2f | %.2f |%n", t.get("tier").asText(),
          t.get("rss_code_first_after_warmup_mib").asDouble(),
          t.get("rss_code_last_mib").asDouble(), k.get("jit_code").asDouble(),
          k.get("anon").asDouble(), k.get("file").asDouble(),
          t.get("rss_slope_without_code_mib_per_1000_steps").asDouble(),
          t.get("rss_growth_tail_mib").asDouble(), t.get("rss_code_growth_tail_mib").asDouble()));
    }
    md.append("\nWhat each kind is and why it grows, measured over up to 3000 steps: "
        + "[soak-rss.md](soak-rss.md).\n");
    return md.toString();
  }
}
