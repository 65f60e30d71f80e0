package dev.lms4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.checkpoint.AsyncCheckpointer;
import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.checkpoint.Checkpoints;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.types.TFloat32;

/**
 * The checkpoint benchmark: save and restore throughput of the {@code files} and {@code tf}
 * backends for a model of float32 variables of a given total size, against {@code dd} writing
 * ({@code conv=fsync}) and reading the same number of bytes on the same disk; and the step-time
 * overhead of {@link AsyncCheckpointer} every N steps on a small MLP training loop (matmuls +
 * {@code ApplyGradientDescent}), with a synchronous save as reference.
 *
 * <p>Restores and {@code dd} reads run after dropping the page cache
 * ({@code /proc/sys/vm/drop_caches}, needs root; the result says {@code "cold_cache": false}
 * when that was not possible, then reads come from memory). The scratch directory is
 * {@code <outDir>/checkpoint-scratch} unless the system property
 * {@code lms4j.bench.scratch} names another; it is removed at the end.
 *
 * <pre>{@code
 * ObjectNode r = CheckpointBench.run(1L << 30, Path.of("docs/bench"), System.out);
 * // writes docs/bench/checkpoint.json and checkpoint.md
 * }</pre>
 */
public final class CheckpointBench {
  private static final Logger LOG = LoggerFactory.getLogger(CheckpointBench.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long VAR_BYTES = 64L << 20;

  /**
   * What the benchmark measures.
   *
   * @param reps          save/restore repetitions per method (after one warm-up round)
   * @param dropCaches    drop the page cache before reads (needs root; affects the whole
   *                      machine)
   * @param mlpWidth      the async measurement's MLP: units per layer
   * @param mlpLayers     its layers
   * @param mlpBatch      its batch
   * @param every         a checkpoint every this many steps
   * @param rounds        rounds of (baseline, async, sync) step blocks
   * @param stepsPerRound steps per block
   */
  public record Config(int reps, boolean dropCaches, int mlpWidth, int mlpLayers, int mlpBatch,
      int every, int rounds, int stepsPerRound) {
    /** The benchmark: 5 reps, cold reads, a 4 x 2048 MLP (batch 256), 6 rounds of 20 steps. */
    public static final Config BENCH = new Config(5, true, 2048, 4, 256, 10, 6, 20);
    /**
     * A smoke run: 2 reps, warm reads (the page cache is left alone), a 2 x 256 MLP (batch 64),
     * 2 rounds of 10 steps with a checkpoint every 5.
     */
    public static final Config SMALL = new Config(2, false, 256, 2, 64, 5, 2, 10);
  }

  private CheckpointBench() {}

  /** Command line: {@code CheckpointBench [MiB (default 1024)] [outDir (default docs/bench)]}. */
  public static void main(String[] args) throws IOException {
    long mib = args.length > 0 ? Long.parseLong(args[0]) : 1024;
    Path out = Path.of(args.length > 1 ? args[1] : "docs/bench");
    run(mib << 20, out, System.out);
  }

  /**
   * Runs the benchmark on {@code bytes} of float32 variables, prints a table to {@code out} and
   * writes {@code checkpoint.json} ({@code "schema": "lms4j-bench/1"}) and {@code checkpoint.md}
   * under {@code outDir}.
   *
   * @return the JSON written
   * @throws IllegalArgumentException when {@code bytes} is below 8 MiB
   * @throws IOException when the disk or {@code dd} fails
   */
  public static ObjectNode run(long bytes, Path outDir, PrintStream out) throws IOException {
    return run(Config.BENCH, bytes, outDir, out);
  }

  /**
   * {@link #run(long, Path, PrintStream)} as {@code c} says.
   *
   * @return the JSON written
   * @throws IllegalArgumentException when {@code bytes} is below 8 MiB
   * @throws IOException when the disk or {@code dd} fails
   */
  public static ObjectNode run(Config c, long bytes, Path outDir, PrintStream out)
      throws IOException {
    if (bytes < (8L << 20)) {
      throw new IllegalArgumentException("the checkpoint benchmark needs at least 8 MiB, got "
          + bytes + " bytes");
    }
    Files.createDirectories(outDir);
    Path scratch = Path.of(System.getProperty("lms4j.bench.scratch",
        outDir.resolve("checkpoint-scratch").toString()));
    deleteTree(scratch);
    Files.createDirectories(scratch);
    ObjectNode root = JSON.createObjectNode();
    root.put("schema", "lms4j-bench/1").put("machine", Machine.describe())
        .put("command", "CheckpointBench.run(" + bytes + ", " + outDir + ")")
        .put("suite", "checkpoint").put("config", c.toString())
        .put("scratch_dir", scratch.toString());
    boolean cold = c.dropCaches() && dropCaches();
    root.put("cold_cache", cold);
    try {
      throughput(c, cold, bytes, scratch, root, out);
      asyncOverhead(c, scratch, root, out);
    } finally {
      deleteTree(scratch);
    }
    Path json = outDir.resolve("checkpoint.json");
    Files.writeString(json, JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    Files.writeString(outDir.resolve("checkpoint.md"), markdown(root));
    out.println("Results: " + json);
    LOG.info("checkpoint bench done: {}", json);
    return root;
  }

  // ------------------------------------------------------------------ throughput

  private static void throughput(Config c, boolean cold, long bytes, Path scratch,
      ObjectNode root, PrintStream out) throws IOException {
    int reps = c.reps();
    int nVars = (int) ((bytes + VAR_BYTES - 1) / VAR_BYTES);
    long perVar = bytes / nVars / 4; // floats
    long total = perVar * 4 * nVars;
    root.put("bytes", total).put("variables", nVars).put("repetitions", reps);
    out.printf(Locale.ROOT, "== checkpoint throughput: %d float32 variables, %.1f MiB, %d reps, "
        + "%s cache for reads ==%n", nVars, total / 1048576.0, reps,
        cold ? "cold" : "WARM (could not drop the page cache)");
    ArrayNode results = root.putArray("results");
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      List<Op> inits = new ArrayList<>();
      List<String> names = new ArrayList<>();
      for (int i = 0; i < nVars; i++) {
        String name = String.format(Locale.ROOT, "v%03d", i);
        Variable<TFloat32> v = tf.withName(name).variable(Shape.of(perVar), TFloat32.class);
        inits.add(tf.assign(v, tf.random.randomUniform(tf.constant(new long[] {perVar}),
            TFloat32.class, RandomUniform.seed(1L), RandomUniform.seed2((long) i))));
        names.add(name);
      }
      tf.withControlDependencies(inits).withName("init").noOp();
      Path file = scratch.resolve("dd.bin");
      long count = (total + (8L << 20) - 1) / (8L << 20);
      List<String> methods = List.of("files", "tf", "dd");
      double[][] save = new double[3][reps];
      double[][] load = new double[3][reps];
      try (Session s = new Session(g)) {
        s.run("init");
        // one untimed warm-up round, then reps rounds; the methods alternate within each round
        // so that a slow minute of the (shared, virtual) disk hits all of them alike
        for (int r = -1; r < reps; r++) {
          for (int m = 0; m < 3; m++) {
            double[] t;
            if (m < 2) {
              t = backendRound(s, names, methods.get(m), scratch.resolve(methods.get(m)),
                  Math.max(r, 0), cold);
            } else {
              Files.deleteIfExists(file);
              double w = dd(out, "if=/dev/zero", "of=" + file, "bs=8M", "count=" + count,
                  "conv=fsync");
              if (cold) {
                dropCaches();
              }
              double rd = dd(out, "if=" + file, "of=/dev/null", "bs=8M");
              Files.deleteIfExists(file);
              t = new double[] {w, rd};
            }
            if (r >= 0) {
              save[m][r] = t[0];
              load[m][r] = t[1];
            }
            out.printf(Locale.ROOT, "  %-5s %s: save %.2f s, restore %.2f s%n", methods.get(m),
                r < 0 ? "warm-up" : "rep " + r, t[0], t[1]);
          }
        }
      }
      results.add(row("files", total, save[0], load[0]));
      results.add(row("tf", total, save[1], load[1]));
      results.add(row("dd", count * (8L << 20), save[2], load[2])
          .put("note", "dd bs=8M conv=fsync from /dev/zero; read to /dev/null"));
    }
    double filesSave = results.get(0).path("save_bytes_per_s").asDouble();
    double filesLoad = results.get(0).path("restore_bytes_per_s").asDouble();
    double tfSave = results.get(1).path("save_bytes_per_s").asDouble();
    double tfLoad = results.get(1).path("restore_bytes_per_s").asDouble();
    double ddSave = results.get(2).path("save_bytes_per_s").asDouble();
    double ddLoad = results.get(2).path("restore_bytes_per_s").asDouble();
    ObjectNode ratios = root.putObject("ratios");
    ratios.put("files_vs_tf_save", filesSave / tfSave).put("files_vs_tf_restore", filesLoad / tfLoad)
        .put("files_vs_dd_save", filesSave / ddSave).put("files_vs_dd_restore", filesLoad / ddLoad);
    ObjectNode targets = root.putObject("targets");
    targets.put("files_vs_tf_save_min", 2.0).put("files_vs_dd_save_min", 0.7)
        .put("files_vs_tf_save_met", filesSave / tfSave >= 2.0)
        .put("files_vs_dd_save_met", filesSave / ddSave >= 0.7);
    out.printf(Locale.ROOT, "%n| method | save MB/s | restore MB/s |%n|---|---|---|%n");
    for (int i = 0; i < 3; i++) {
      out.printf(Locale.ROOT, "| %s | %.0f | %.0f |%n", results.get(i).path("method").asText(),
          results.get(i).path("save_bytes_per_s").asDouble() / 1e6,
          results.get(i).path("restore_bytes_per_s").asDouble() / 1e6);
    }
    out.printf(Locale.ROOT, "files/tf: save %.2fx, restore %.2fx (target save >= 2x: %s); "
        + "files/dd: save %.0f%%, restore %.0f%% (target save >= 70%%: %s)%n",
        filesSave / tfSave, filesLoad / tfLoad, filesSave / tfSave >= 2 ? "met" : "NOT met",
        100 * filesSave / ddSave, 100 * filesLoad / ddLoad,
        filesSave / ddSave >= 0.7 ? "met" : "NOT met");
  }

  /** One save + restore through a backend into a fresh directory: {save s, restore s}. */
  private static double[] backendRound(Session s, List<String> names, String backend, Path dir,
      int step, boolean cold) throws IOException {
    deleteTree(dir);
    double[] t = new double[2];
    try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + dir + ",keep=0")) {
      long t0 = System.nanoTime();
      Checkpoints.save(s, names, step, Map.of(), b);
      t[0] = (System.nanoTime() - t0) / 1e9;
      if (cold) {
        dropCaches();
      }
      t0 = System.nanoTime();
      Checkpoints.load(s, names, b);
      t[1] = (System.nanoTime() - t0) / 1e9;
    }
    deleteTree(dir);
    return t;
  }

  private static ObjectNode row(String method, long bytes, double[] save, double[] load) {
    ObjectNode r = JSON.createObjectNode();
    double ms = median(save);
    double ml = median(load);
    r.put("method", method).put("bytes", bytes).put("save_s_median", ms)
        .put("restore_s_median", ml).put("save_bytes_per_s", bytes / ms)
        .put("restore_bytes_per_s", bytes / ml);
    ArrayNode a = r.putArray("save_s");
    Arrays.stream(save).forEach(a::add);
    ArrayNode b = r.putArray("restore_s");
    Arrays.stream(load).forEach(b::add);
    return r;
  }

  /** Runs dd and returns its wall time in seconds. */
  private static double dd(PrintStream out, String... args) throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add("dd");
    cmd.addAll(Arrays.asList(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    long t0 = System.nanoTime();
    Process p = pb.start();
    String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    try {
      if (!p.waitFor(10, TimeUnit.MINUTES) || p.exitValue() != 0) {
        throw new IOException("dd " + String.join(" ", args) + " failed: " + text.trim());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while running dd", e);
    }
    return (System.nanoTime() - t0) / 1e9;
  }

  /** sync + drop the page cache; false when not permitted. */
  private static boolean dropCaches() {
    try {
      Process p = new ProcessBuilder("sync").inheritIO().start();
      p.waitFor(5, TimeUnit.MINUTES);
      Files.writeString(Path.of("/proc/sys/vm/drop_caches"), "3");
      return true;
    } catch (IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  // ------------------------------------------------------------------ async overhead

  private static void asyncOverhead(Config c, Path scratch, ObjectNode root, PrintStream out)
      throws IOException {
    int width = c.mlpWidth();
    int layers = c.mlpLayers();
    int batch = c.mlpBatch();
    int every = c.every();
    int rounds = c.rounds();
    int stepsPerRound = c.stepsPerRound();
    long modelBytes = (long) width * width * 4 * layers;
    out.printf(Locale.ROOT, "%n== async checkpoint overhead: MLP %d x %dx%d float32 (%.0f MiB), "
        + "batch %d, checkpoint every %d steps, files backend (async: threads=1) ==%n", layers, width,
        width, modelBytes / 1048576.0, batch, every);
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Operand<TFloat32> x = tf.random.randomUniform(tf.constant(new long[] {batch,
          width}), TFloat32.class, RandomUniform.seed(1L), RandomUniform.seed2(1L));
      Operand<TFloat32> h = x;
      List<Variable<TFloat32>> vars = new ArrayList<>();
      List<Op> inits = new ArrayList<>();
      for (int i = 0; i < layers; i++) {
        Variable<TFloat32> w = tf.withName("w" + i).variable(Shape.of(width, width),
            TFloat32.class);
        inits.add(tf.assign(w, tf.math.mul(tf.random.randomUniform(tf.constant(new long[] {
            width, width}), TFloat32.class, RandomUniform.seed(2L),
            RandomUniform.seed2((long) i)), tf.constant(0.02f))));
        vars.add(w);
        h = tf.math.tanh(tf.linalg.matMul(h, w));
      }
      Operand<TFloat32> loss = tf.withName("loss").math.mean(tf.math.square(h),
          tf.constant(new int[] {0, 1}));
      Output<?>[] grads = g.addGradients("gradients", new Output<?>[] {loss.asOutput()},
          vars.stream().map(Variable::asOutput).toArray(Output<?>[]::new), null);
      List<Op> updates = new ArrayList<>();
      for (int i = 0; i < vars.size(); i++) {
        updates.add(tf.train.applyGradientDescent(vars.get(i), tf.constant(0.01f),
            grads[i].expect(TFloat32.class)));
      }
      tf.withControlDependencies(updates).withName("train").noOp();
      tf.withControlDependencies(inits).withName("init").noOp();
      List<String> names = Checkpoints.variables(g);
      // the background writer uses one thread: it need not be fast, only out of the way of
      // the training step's own threads on a 2-core machine
      try (Session s = new Session(g, ConfigProto.getDefaultInstance());
          CheckpointBackend bg = CheckpointBackends.open("files", "dir=" + scratch.resolve(
              "async") + ",keep=2,threads=1");
          CheckpointBackend b = CheckpointBackends.open("files", "dir=" + scratch.resolve(
              "sync") + ",keep=2");
          AsyncCheckpointer async = AsyncCheckpointer.builder(bg).build()) {
        s.run("init");
        for (int i = 0; i < 5; i++) {
          s.run("train"); // warm-up
        }
        List<Double> base = new ArrayList<>();
        List<Double> withAsync = new ArrayList<>();
        List<Double> withSync = new ArrayList<>();
        List<Double> snapshotMs = new ArrayList<>();
        long step = 0;
        double awaitMs = 0;
        // blocks of baseline, async and sync steps alternate so that load from elsewhere hits
        // all three alike; a checkpoint is taken at the first step of every `every`, so each
        // background write overlaps the timed steps after it, and the wait for the last one at
        // the end of a block is added to the async total
        for (int round = 0; round < rounds; round++) {
          for (int i = 0; i < stepsPerRound; i++) {
            base.add(timeStep(s));
          }
          for (int i = 0; i < stepsPerRound; i++) {
            long t0 = System.nanoTime();
            s.run("train");
            step++;
            if (i % every == 0) {
              long t1 = System.nanoTime();
              async.save(s, names, step, Map.of());
              snapshotMs.add((System.nanoTime() - t1) / 1e6);
            }
            withAsync.add((System.nanoTime() - t0) / 1e6);
          }
          long tw = System.nanoTime();
          async.await();
          awaitMs += (System.nanoTime() - tw) / 1e6;
          for (int i = 0; i < stepsPerRound; i++) {
            long t0 = System.nanoTime();
            s.run("train");
            step++;
            if (i % every == 0) {
              Checkpoints.save(s, names, step, Map.of(), b);
            }
            withSync.add((System.nanoTime() - t0) / 1e6);
          }
        }
        double mb = mean(base);
        double ma = (mean(withAsync) * withAsync.size() + awaitMs) / withAsync.size();
        double msync = mean(withSync);
        ObjectNode a = root.putObject("async");
        a.put("model_bytes", modelBytes).put("layers", layers).put("width", width)
            .put("batch", batch).put("checkpoint_every", every)
            .put("steps_measured", base.size()).put("step_ms_mean_no_checkpoint", mb)
            .put("step_ms_median_no_checkpoint", median(toArray(base)))
            .put("step_ms_median_async", median(toArray(withAsync)))
            .put("step_ms_mean_async", ma).put("step_ms_mean_sync", msync)
            .put("await_ms_total", awaitMs)
            .put("snapshot_ms_median", median(snapshotMs.stream().mapToDouble(d -> d).toArray()))
            .put("overhead_async", (ma - mb) / mb).put("overhead_sync", (msync - mb) / mb)
            .put("target_overhead_max", 0.05).put("target_met", (ma - mb) / mb <= 0.05);
        out.printf(Locale.ROOT, "step time (mean of %d steps): %.1f ms without checkpoints, "
            + "%.1f ms with async checkpoints (%+.1f%%, snapshot %.0f ms median), %.1f ms with "
            + "synchronous ones (%+.1f%%); target async <= 5%%: %s%n", base.size(), mb, ma,
            100 * (ma - mb) / mb, a.path("snapshot_ms_median").asDouble(), msync,
            100 * (msync - mb) / mb, (ma - mb) / mb <= 0.05 ? "met" : "NOT met");
      }
    }
  }

  private static double timeStep(Session s) {
    long t0 = System.nanoTime();
    s.run("train");
    return (System.nanoTime() - t0) / 1e6;
  }

  private static double[] toArray(List<Double> xs) {
    return xs.stream().mapToDouble(d -> d).toArray();
  }

  private static double mean(List<Double> xs) {
    return xs.stream().mapToDouble(d -> d).average().orElse(Double.NaN);
  }

  private static double median(double[] xs) {
    double[] c = xs.clone();
    Arrays.sort(c);
    return c.length % 2 == 1 ? c[c.length / 2] : (c[c.length / 2 - 1] + c[c.length / 2]) / 2;
  }

  private static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p)) {
      return;
    }
    try (var s = Files.walk(p)) {
      for (Path q : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(q);
      }
    }
  }

  // ------------------------------------------------------------------ report

  private static String markdown(ObjectNode root) {
    StringBuilder sb = new StringBuilder("# lms4j checkpoint benchmark\n\n");
    sb.append("Machine: ").append(root.path("machine").asText()).append("\n\n");
    sb.append("Command: `").append(root.path("command").asText()).append("`\n\n");
    sb.append(String.format(Locale.ROOT, "%d float32 variables, %.1f MiB; median of %d; reads "
        + "%s.%n%n", root.path("variables").asInt(), root.path("bytes").asLong() / 1048576.0,
        root.path("repetitions").asInt(), root.path("cold_cache").asBoolean()
            ? "after dropping the page cache" : "from a warm page cache"));
    sb.append("| method | save (s) | save MB/s | restore (s) | restore MB/s |\n|---|---|---|---|---|\n");
    root.path("results").forEach(r -> sb.append(String.format(Locale.ROOT,
        "| %s | %.2f | %.0f | %.2f | %.0f |%n", r.path("method").asText(),
        r.path("save_s_median").asDouble(), r.path("save_bytes_per_s").asDouble() / 1e6,
        r.path("restore_s_median").asDouble(), r.path("restore_bytes_per_s").asDouble() / 1e6)));
    var ra = root.path("ratios");
    sb.append(String.format(Locale.ROOT, "%nfiles / tf: save %.2fx, restore %.2fx (target save "
        + ">= 2x: %s). files / dd: save %.0f%%, restore %.0f%% (target save >= 70%%: %s).%n",
        ra.path("files_vs_tf_save").asDouble(), ra.path("files_vs_tf_restore").asDouble(),
        root.path("targets").path("files_vs_tf_save_met").asBoolean() ? "met" : "not met",
        100 * ra.path("files_vs_dd_save").asDouble(), 100 * ra.path("files_vs_dd_restore")
            .asDouble(), root.path("targets").path("files_vs_dd_save_met").asBoolean()
            ? "met" : "not met"));
    var a = root.path("async");
    sb.append(String.format(Locale.ROOT, "%nAsync checkpointing, MLP %d x %d (%.0f MiB), batch %d, "
        + "every %d steps: %.1f ms/step without checkpoints, %.1f ms async (%+.1f%%; snapshot "
        + "%.0f ms), %.1f ms synchronous (%+.1f%%). Target async <= 5%%: %s.%n",
        a.path("layers").asInt(), a.path("width").asInt(), a.path("model_bytes").asLong()
            / 1048576.0, a.path("batch").asInt(), a.path("checkpoint_every").asInt(),
        a.path("step_ms_mean_no_checkpoint").asDouble(), a.path("step_ms_mean_async").asDouble(),
        100 * a.path("overhead_async").asDouble(), a.path("snapshot_ms_median").asDouble(),
        a.path("step_ms_mean_sync").asDouble(), 100 * a.path("overhead_sync").asDouble(),
        a.path("target_met").asBoolean() ? "met" : "not met"));
    return sb.toString();
  }
}
