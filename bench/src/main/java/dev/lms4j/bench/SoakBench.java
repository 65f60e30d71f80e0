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
import java.util.OptionalLong;
import java.util.stream.Stream;

/**
 * The soak benchmark (issue 17): a long budgeted run with LMS swapping, per tier (host memory
 * and disk), next to the same run without LMS, with the worker JVM's resident set sampled as it
 * trains.
 *
 * <p>Each tier's worker runs a warm-up and then the measured steps, all of them real budgeted
 * steps of one run. The warm-up is long because the JVM's JIT keeps compiling the methods that
 * run once or a few times per step for hundreds of steps (see docs/bench/soak-rss.md); the
 * worker's JIT compilations are counted (with {@code jstat -compiler}, which reads the worker's
 * performance-data file without attaching to it) to show how many still happen in the measured
 * window.
 *
 * <p>What it checks, and prints as met or not met per tier:
 * <ul>
 *   <li>flat RSS after the warm-up ({@link Flatness}): the least-squares slope of the RSS samples
 *       over the measured steps, and the growth over the last {@value #TAIL_STEPS} of them, are
 *       each at most {@value Flatness#MAX_MIB_PER_1000_STEPS} MiB per 1000 steps;</li>
 *   <li>swap files back to zero: after the run the swap directory holds 0 bytes in 0 files, and
 *       at no step did it hold more than one step's swap-outs (plus {@value
 *       #FILE_OVERHEAD_BYTES} bytes of serialization header per file), so nothing piles up from
 *       step to step. Its size is read once per step while the worker goes on with the next
 *       one, so a read can catch that step's files in flight; the count of reads at zero says
 *       how often it did not.</li>
 * </ul>
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
  /** How often the worker's JIT compilations are counted. */
  private static final int COMPILES_EVERY = 100;
  /** The end of the run whose growth shows whether RSS has levelled off. */
  static final int TAIL_STEPS = 300;
  /** Bytes a swap file may hold beyond the tensor's own (the serialized TensorProto's header). */
  static final int FILE_OVERHEAD_BYTES = 1024;

  private SoakBench() {}

  /**
   * The flatness criterion for the RSS samples after the warm-up: the least-squares slope over
   * the measured steps and the growth over their last {@value SoakBench#TAIL_STEPS} steps (last
   * sample minus the first in that stretch), each scaled to MiB per 1000 steps, are both at most
   * {@value #MAX_MIB_PER_1000_STEPS}. That is 512 bytes per step, about 0.1% of the worker's
   * RSS (460-480 MiB) per 1000 steps: a leak of one 1 KiB buffer per step fails it, and so does
   * a one-off jump of 0.35 MiB or more in the middle of the measured steps (a step of {@code h}
   * MiB halfway through {@code n} steps gives a slope of {@code 1.5 h / n}) or of 0.15 MiB in
   * the last 300.
   *
   * @param slopeMibPer1000Steps the least-squares slope, MiB per 1000 steps
   * @param tailGrowthMib        RSS growth over the last {@code tailSteps} measured steps, MiB
   * @param tailSteps            the steps between the tail's first and last sample
   * @param met                  both are within the limit
   */
  record Flatness(double slopeMibPer1000Steps, double tailGrowthMib, int tailSteps,
      boolean met) {
    /** The limit of both the slope and the tail's growth, in MiB per 1000 steps. */
    static final double MAX_MIB_PER_1000_STEPS = 0.5;

    /**
     * Judges samples taken after the warm-up (column 0 the step, column 2 RSS in MiB, in step
     * order). Fewer than two samples, or a tail of fewer than two, is not met.
     */
    static Flatness of(double[][] after) {
      double slope = 1000 * slope(after, 0);
      double last = after.length > 0 ? after[after.length - 1][0] : 0;
      double[][] tail = Arrays.stream(after).filter(x -> x[0] >= last - TAIL_STEPS)
          .toArray(double[][]::new);
      double growth = tail.length < 2 ? Double.NaN : growth(tail, 2);
      int tailSteps = tail.length < 2 ? 0 : (int) (tail[tail.length - 1][0] - tail[0][0]);
      boolean met = !Double.isNaN(slope) && !Double.isNaN(growth)
          && slope <= MAX_MIB_PER_1000_STEPS
          && growth <= MAX_MIB_PER_1000_STEPS * tailSteps / 1000.0;
      return new Flatness(slope, growth, tailSteps, met);
    }

    /** The tail's growth limit in MiB ({@link #MAX_MIB_PER_1000_STEPS} over its steps). */
    double tailLimitMib() {
      return MAX_MIB_PER_1000_STEPS * tailSteps / 1000.0;
    }
  }

  /**
   * Runs the soak: the reference without LMS, then the host and the disk tier.
   *
   * @param outDir where soak.json and soak.md go
   * @param steps  steps per tier, warm-up included (the issue asks for 1000 measured ones)
   * @param warmup the first steps, left out of the flatness criterion
   * @param out    progress
   * @return the JSON written
   * @throws IOException when a run cannot start or a result cannot be written
   */
  public static ObjectNode run(Path outDir, int steps, int warmup, PrintStream out)
      throws IOException {
    if (warmup < 0 || steps < warmup + TAIL_STEPS + 2 * SAMPLE_EVERY) {
      throw new IllegalArgumentException("steps must exceed the warm-up (" + warmup
          + ") by at least " + (TAIL_STEPS + 2 * SAMPLE_EVERY));
    }
    long t0 = System.nanoTime();
    ObjectNode root = JSON.createObjectNode();
    root.put("schema", "lms4j-bench/1").put("suite", "soak").put("machine", Machine.describe())
        .put("date", Instant.now().toString()).put("model", "mlp").put("options",
            OPTIONS.toString()).put("batch", BATCH).put("budget_bytes", BUDGET)
        .put("mode", LmsMode.TFLMS.cliName()).put("steps", steps).put("warmup_steps", warmup)
        .put("measured_steps", steps - warmup)
        .put("flat_max_mib_per_1000_steps", Flatness.MAX_MIB_PER_1000_STEPS)
        .put("tail_steps", TAIL_STEPS)
        .put("malloc_arena_max", Optional.ofNullable(System.getenv("MALLOC_ARENA_MAX"))
            .orElse("unset (glibc default)"))
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
    for (var t : root.get("tiers")) {
      out.printf(Locale.ROOT, "%-26s flat after the warm-up: %s; swap files back to zero: %s%n",
          t.get("tier").asText() + ":", verdict(t.path("rss_flat_met")),
          verdict(t.path("swap_files_zero_met")));
    }
    out.println("Wrote " + outDir.resolve("soak.json") + " and soak.md");
    return root;
  }

  private static String verdict(com.fasterxml.jackson.databind.JsonNode met) {
    return met.isMissingNode() ? "not measured (the run failed)" : met.asBoolean() ? "met"
        : "not met";
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
      long swapped = 0;
      if (tier != null) {
        LmsResult lr = Lms.builder().budget(BUDGET).mode(LmsMode.TFLMS)
            .params(SwapParams.defaults().toBuilder().tier(tier).build()).swapDir(swapDir)
            .build().rewrite(tg);
        swapOuts = lr.plan().swapOuts().size();
        swapped = lr.plan().swapOutBytes();
        row.put("swapped_bytes", swapped)
            .put("predicted_peak_bytes", lr.predictedPeakAfter());
        rewritten = new TrainingGraph(lr.graphDef(), tg.manifest());
        budget = BUDGET;
      }
      row.put("swap_outs", swapOuts).put("budget_bytes", budget);
      // step, minutes, RSS MiB, swap file bytes, then RSS MiB by kind: JIT code, anon, file
      List<double[]> samples = new ArrayList<>();
      // step, JIT compilations so far (jstat), JIT code MiB
      List<double[]> compiles = new ArrayList<>();
      // swap directory bytes read once per step: max, reads at zero, reads
      long[] swapReads = {0, 0, 0};
      long start = System.nanoTime();
      BudgetedRunner.Options base = BudgetedRunner.Options.of(budget, steps);
      BudgetedRunner.Options o = new BudgetedRunner.Options(budget, steps, base.seed(),
          base.deterministic(), base.memOpt(), Duration.ofMinutes(120));
      out.printf(Locale.ROOT, "== %s: %d steps of mlp (batch %d, the first %d a warm-up), %s, "
              + "%d swap-outs ==%n", tier == null ? "reference" : tier + " tier", steps, BATCH,
          warmup, budget > 0 ? "under " + (budget >> 20) + " MiB" : "no budget", swapOuts);
      RunResult r = BudgetedRunner.run(rewritten, o, s -> {
        long bytes = swapBytes(swapDir);
        swapReads[0] = Math.max(swapReads[0], bytes);
        swapReads[1] += bytes == 0 ? 1 : 0;
        swapReads[2]++;
        // the last step is not sampled: the worker then closes its session, and a sample taken
        // while it does reads memory on its way back (9 MiB lower in one run)
        if (s.step() % SAMPLE_EVERY != 0 || s.step() == steps) {
          return;
        }
        Optional<ProcessHandle> w = worker();
        Optional<Resident> rss = w.flatMap(SoakBench::resident);
        if (rss.isPresent()) {
          Resident m = rss.get();
          samples.add(new double[] {s.step(), (System.nanoTime() - start) / 6e10,
              m.totalKib() / 1024.0, bytes, m.codeKib() / 1024.0,
              m.anonKib() / 1024.0, m.fileKib() / 1024.0});
        }
        if (s.step() % COMPILES_EVERY == 0) {
          OptionalLong c = w.map(SoakBench::compilations).orElse(OptionalLong.empty());
          if (c.isPresent() && rss.isPresent()) {
            compiles.add(new double[] {s.step(), c.getAsLong(), rss.get().codeKib() / 1024.0});
          }
          out.printf(Locale.ROOT, "  step %d: worker RSS %.1f MiB (JIT code %.2f), JIT "
                  + "compilations %s, swap files %d bytes%n", s.step(),
              rss.map(k -> k.totalKib() / 1024.0).orElse(Double.NaN),
              rss.map(k -> k.codeKib() / 1024.0).orElse(Double.NaN),
              c.isPresent() ? Long.toString(c.getAsLong()) : "n/a", bytes);
        }
      });
      row.put("fits", r.fits()).put("steps_run", r.steps().size());
      if (!r.fits()) {
        row.put("error", r.error());
        out.println("  failed: " + r.error());
        return row;
      }
      double[][] after = samples.stream().filter(x -> x[0] >= warmup).toArray(double[][]::new);
      Flatness flat = Flatness.of(after);
      row.put("measured_peak_bytes", r.peakBytes()).put("median_ms_per_step", r.medianMs())
          .put("median_ms_per_step_measured", median(r.steps().stream()
              .filter(x -> x.step() > warmup).mapToDouble(x -> x.ms()).toArray()))
          .put("rss_samples", samples.size())
          .put("rss_samples_after_warmup", after.length)
          .put("rss_at_warmup_end_mib", after.length > 0 ? after[0][2] : Double.NaN)
          .put("rss_last_mib", after.length > 0 ? after[after.length - 1][2] : Double.NaN)
          .put("rss_max_after_warmup_mib", Arrays.stream(after).mapToDouble(x -> x[2]).max()
              .orElse(Double.NaN))
          .put("rss_slope_mib_per_1000_steps", flat.slopeMibPer1000Steps())
          .put("rss_slope_mib_per_minute", slope(after, 1))
          .put("rss_growth_tail_mib", flat.tailGrowthMib())
          .put("rss_tail_limit_mib", flat.tailLimitMib())
          .put("rss_flat_met", flat.met())
          .put("rss_code_at_warmup_end_mib", after.length > 0 ? after[0][4] : Double.NaN)
          .put("rss_code_last_mib", after.length > 0 ? after[after.length - 1][4] : Double.NaN)
          .put("rss_slope_without_code_mib_per_1000_steps", 1000 * slope(withoutCode(after), 0));
      double lastStep = after.length > 0 ? after[after.length - 1][0] : 0;
      double[][] tail = Arrays.stream(after).filter(x -> x[0] >= lastStep - TAIL_STEPS)
          .toArray(double[][]::new);
      row.put("rss_code_growth_tail_mib", growth(tail, 4));
      ObjectNode byKind = row.putObject("rss_slope_by_kind_mib_per_1000_steps");
      for (int k = 0; k < KINDS.length; k++) {
        byKind.put(KINDS[k], 1000 * slope(column(after, 4 + k), 0));
      }
      // JIT compilations: up to the end of the warm-up and in the measured steps
      double[] atWarmup = compiles.stream().filter(x -> x[0] >= warmup).findFirst()
          .orElse(null);
      double[] lastCount = compiles.isEmpty() ? null : compiles.get(compiles.size() - 1);
      if (atWarmup != null) {
        row.put("jit_compilations_at_step", (int) atWarmup[0])
            .put("jit_compilations_at_warmup_end", (long) atWarmup[1])
            .put("jit_compilations_after_warmup", (long) (lastCount[1] - atWarmup[1]))
            .put("jit_compilations_counted_to_step", (int) lastCount[0]);
      }
      ArrayNode cs = row.putArray("jit_series");
      for (double[] x : compiles) {
        cs.addArray().add((int) x[0]).add((long) x[1]).add(Math.round(x[2] * 100) / 100.0);
      }
      long bytesAfter = swapBytes(swapDir);
      int filesAfter = fileCount(swapDir);
      long oneStep = swapped + (long) FILE_OVERHEAD_BYTES * swapOuts;
      row
          .put("swap_file_bytes_max_read", swapReads[0])
          .put("swap_file_one_step_limit_bytes", tier == Tier.DISK ? oneStep : 0)
          .put("swap_file_reads", swapReads[2])
          .put("swap_file_reads_at_zero", swapReads[1])
          .put("swap_file_bytes_after_run", bytesAfter)
          .put("swap_files_after_run", filesAfter)
          .put("swap_files_zero_met", bytesAfter == 0 && filesAfter == 0
              && swapReads[0] <= (tier == Tier.DISK ? oneStep : 0));
      ArrayNode series = row.putArray("rss_series");
      for (double[] x : samples) {
        series.addArray().add((int) x[0]).add(Math.round(x[2] * 100) / 100.0)
            .add(Math.round(x[4] * 100) / 100.0).add(Math.round(x[5] * 100) / 100.0)
            .add(Math.round(x[6] * 100) / 100.0);
      }
      out.printf(Locale.ROOT, "  RSS after the warm-up %.2f -> %.2f MiB: slope %.3f MiB per "
              + "1000 steps (%.3f without JIT code), growth over the last %d steps %.2f MiB "
              + "(limits %.2f and %.2f): flat %s; JIT code %.2f -> %.2f MiB, %s compilations "
              + "after the warm-up; swap files: at most %d bytes, after the run %d bytes in %d "
              + "files: %s%n",
          row.get("rss_at_warmup_end_mib").asDouble(), row.get("rss_last_mib").asDouble(),
          flat.slopeMibPer1000Steps(),
          row.get("rss_slope_without_code_mib_per_1000_steps").asDouble(), flat.tailSteps(),
          flat.tailGrowthMib(), Flatness.MAX_MIB_PER_1000_STEPS, flat.tailLimitMib(),
          flat.met() ? "met" : "not met", row.get("rss_code_at_warmup_end_mib").asDouble(),
          row.get("rss_code_last_mib").asDouble(),
          row.path("jit_compilations_after_warmup").asText("n/a"), swapReads[0], bytesAfter,
          filesAfter, row.get("swap_files_zero_met").asBoolean() ? "met" : "not met");
      return row;
    } finally {
      try (Stream<Path> s = Files.walk(swapDir)) {
        s.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
      }
    }
  }

  private static double median(double[] xs) {
    if (xs.length == 0) {
      return Double.NaN;
    }
    double[] s = xs.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  /**
   * The number of methods the JIT has compiled in {@code p} so far, from {@code jstat
   * -compiler} (the JDK's tool reads the JVM's performance-data file; the worker is not
   * attached to, so it runs no extra thread for it). Empty when jstat is missing or fails.
   */
  private static OptionalLong compilations(ProcessHandle p) {
    Path jstat = Path.of(System.getProperty("java.home"), "bin", "jstat");
    if (!Files.isExecutable(jstat)) {
      return OptionalLong.empty();
    }
    try {
      Process j = new ProcessBuilder(jstat.toString(), "-compiler", Long.toString(p.pid()))
          .redirectErrorStream(true).start();
      String text = new String(j.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!j.waitFor(30, java.util.concurrent.TimeUnit.SECONDS) || j.exitValue() != 0) {
        j.destroyForcibly();
        return OptionalLong.empty();
      }
      return parseCompiled(text);
    } catch (IOException e) {
      return OptionalLong.empty();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return OptionalLong.empty();
    }
  }

  /** The {@code Compiled} column of {@code jstat -compiler} output (empty if there is none). */
  static OptionalLong parseCompiled(String jstatOutput) {
    String[] lines = jstatOutput.strip().split("\\R");
    if (lines.length < 2 || !lines[0].trim().startsWith("Compiled")) {
      return OptionalLong.empty();
    }
    String first = lines[1].trim().split("\\s+")[0];
    return first.matches("[0-9]+") ? OptionalLong.of(Long.parseLong(first))
        : OptionalLong.empty();
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
            + "%s; %.1f min; load average %.1f at the start, %.1f at the end; "
            + "`MALLOC_ARENA_MAX` %s.%n%n",
        root.get("machine").asText(), root.get("date").asText(), root.get("minutes").asDouble(),
        root.get("load_average_start").asDouble(), root.get("load_average_end").asDouble(),
        root.get("malloc_arena_max").asText()));
    int warmup = root.get("warmup_steps").asInt();
    double max = root.get("flat_max_mib_per_1000_steps").asDouble();
    int tailSteps = root.get("tail_steps").asInt();
    md.append(String.format(Locale.ROOT, "mlp (%s) at batch %d under a BFC budget of %d MiB "
            + "with `--lms %s` (it runs out of memory without LMS), per tier one worker JVM "
            + "running %d steps: a warm-up of %d steps, then %d measured steps, all of them "
            + "budgeted training steps. The worker's RSS (the sum of `Rss` over "
            + "`/proc/PID/smaps`) is sampled every %d steps but the last (the worker is closing "
            + "its session by then), and its JIT compilations are counted every %d steps "
            + "(`jstat -compiler`, which reads the JVM's performance-data file and does not "
            + "attach to it). The swap directory's size is read once per step, while the worker "
            + "runs the next one.%n%n",
        root.get("options").asText(), root.get("batch").asInt(),
        root.get("budget_bytes").asLong() >> 20, root.get("mode").asText(),
        root.get("steps").asInt(), warmup, root.get("measured_steps").asInt(), SAMPLE_EVERY,
        COMPILES_EVERY));
    md.append(String.format(Locale.ROOT, "**Flat after the warm-up** means: the least-squares "
            + "slope of RSS over the samples from step %d on, and the growth over the last %d "
            + "sampled steps (last sample minus the first of that stretch), are both at most "
            + "%.1f MiB per 1000 steps (%.2f MiB over %d steps). That is 512 bytes per step, "
            + "about 0.1%% of the worker's RSS per 1000 steps: a leak of one 1 KiB buffer per "
            + "step fails it, and so does a one-off jump of 0.35 MiB halfway through the "
            + "measured steps. **Swap files back to zero** means: after the run the swap "
            + "directory holds 0 bytes in 0 files, and no read during the run found more than "
            + "one step's swap-outs in it (the swapped bytes plus %d bytes of header per file), "
            + "so nothing piles up from step to step.%n%n",
        warmup, tailSteps, max, max * tailSteps / 1000, tailSteps, FILE_OVERHEAD_BYTES));
    md.append("The first row is the reference: the same graph and steps without LMS and "
        + "without a budget; what it shows, LMS does not add.\n\n");
    md.append(String.format(Locale.ROOT, "| tier | fits | swap-outs | ms/step after the "
        + "warm-up | RSS at step %d -> last (MiB) | slope MiB / 1000 steps | slope MiB / min "
        + "| growth over the last %d steps (MiB) | flat after the warm-up | swap dir: most "
        + "bytes read (limit) | reads at 0 | after the run | swap files back to zero |%n"
        + "|---|---|---|---|---|---|---|---|---|---|---|---|---|%n", warmup, tailSteps));
    for (var t : root.get("tiers")) {
      if (!t.get("fits").asBoolean()) {
        md.append("| ").append(t.get("tier").asText()).append(" | no: ")
            .append(t.path("error").asText()).append(" ||||||||||||\n");
        continue;
      }
      md.append(String.format(Locale.ROOT, "| %s | yes | %d | %.1f | %.2f -> %.2f | %.3f | "
              + "%.3f | %.2f | **%s** | %d (%d) | %d of %d | %d bytes in %d files | **%s** |%n",
          t.get("tier").asText(), t.get("swap_outs").asInt(),
          t.get("median_ms_per_step_measured").asDouble(),
          t.get("rss_at_warmup_end_mib").asDouble(), t.get("rss_last_mib").asDouble(),
          t.get("rss_slope_mib_per_1000_steps").asDouble(),
          t.get("rss_slope_mib_per_minute").asDouble(),
          t.get("rss_growth_tail_mib").asDouble(),
          t.get("rss_flat_met").asBoolean() ? "met" : "not met",
          t.get("swap_file_bytes_max_read").asLong(),
          t.get("swap_file_one_step_limit_bytes").asLong(),
          t.get("swap_file_reads_at_zero").asLong(), t.get("swap_file_reads").asLong(),
          t.get("swap_file_bytes_after_run").asLong(), t.get("swap_files_after_run").asInt(),
          t.get("swap_files_zero_met").asBoolean() ? "met" : "not met"));
    }
    md.append("\nThe warm-up: RSS and JIT code (anonymous executable memory: the JVM's code "
        + "cache) at some steps, and the JIT compilations counted up to the end of the warm-up "
        + "and after it.\n\n");
    int steps = root.get("steps").asInt();
    int[] at = java.util.stream.IntStream.of(100, warmup / 2, warmup,
        warmup + (steps - warmup) / 2).map(a -> a / SAMPLE_EVERY * SAMPLE_EVERY)
        .filter(a -> a > 0).distinct().sorted().toArray();
    StringBuilder head = new StringBuilder("| tier |");
    for (int a : at) {
      head.append(" RSS / JIT code at step ").append(a).append(" |");
    }
    md.append(head).append(" last sample | JIT compilations by the end of the warm-up | "
        + "after it |\n|---|").append("---|".repeat(at.length + 3)).append("\n");
    for (var t : root.get("tiers")) {
      if (!t.get("fits").asBoolean()) {
        continue;
      }
      md.append("| ").append(t.get("tier").asText()).append(" |");
      var series = t.get("rss_series");
      for (int a : at) {
        md.append(" ").append(sampleAt(series, a)).append(" |");
      }
      md.append(" ").append(series.isEmpty() ? "-" : sampleAt(series,
          series.get(series.size() - 1).get(0).asInt())).append(" | ")
          .append(t.has("jit_compilations_at_step") ? t.get("jit_compilations_at_warmup_end")
              .asText() + " (step " + t.get("jit_compilations_at_step").asInt() + ")" : "n/a")
          .append(" | ").append(t.has("jit_compilations_after_warmup") ? t.get(
              "jit_compilations_after_warmup").asText() + " (to step " + t.get(
              "jit_compilations_counted_to_step").asInt() + ")" : "n/a").append(" |\n");
    }
    md.append("\nWhere a slope after the warm-up comes from: the RSS samples split by kind of "
        + "mapping (`/proc/PID/smaps`): JIT code is anonymous executable memory, anon the "
        + "rest of the anonymous memory (Java heap, malloc arenas, TensorFlow's allocator, "
        + "thread stacks), file the mapped libraries.\n\n");
    md.append(String.format(Locale.ROOT, "| tier | slope MiB / 1000 steps: JIT code | anon | "
        + "file | RSS without JIT code | JIT code growth over the last %d steps (MiB) |%n"
        + "|---|---|---|---|---|---|%n", tailSteps));
    for (var t : root.get("tiers")) {
      if (!t.get("fits").asBoolean()) {
        continue;
      }
      var k = t.get("rss_slope_by_kind_mib_per_1000_steps");
      md.append(String.format(Locale.ROOT, "| %s | %.3f | %.3f | %.3f | %.3f | %.2f |%n",
          t.get("tier").asText(), k.get("jit_code").asDouble(), k.get("anon").asDouble(),
          k.get("file").asDouble(), t.get("rss_slope_without_code_mib_per_1000_steps")
              .asDouble(), t.get("rss_code_growth_tail_mib").asDouble()));
    }
    md.append("\nWhat each kind is and why it grows, measured over up to 3000 steps: "
        + "[soak-rss.md](soak-rss.md).\n");
    return md.toString();
  }

  /** "RSS / JIT code" of the sample at {@code step} of an rss_series, or "-". */
  private static String sampleAt(com.fasterxml.jackson.databind.JsonNode series, int step) {
    for (var x : series) {
      if (x.get(0).asInt() == step) {
        return String.format(Locale.ROOT, "%.2f / %.2f", x.get(1).asDouble(),
            x.get(2).asDouble());
      }
    }
    return "-";
  }
}
