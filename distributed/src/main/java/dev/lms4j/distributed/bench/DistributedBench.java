package dev.lms4j.distributed.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.distributed.Cluster;
import dev.lms4j.distributed.WorkerGroup;
import dev.lms4j.tf.run.BudgetedRunner;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The data-parallel benchmark: mlp training throughput (samples/s of the job) with 1, 2 and 4
 * local workers at a fixed per-worker batch, and the bandwidth of one {@code CollectiveReduceV2}
 * over 2 and 4 workers against a plain TCP stream on loopback. Writes
 * {@code distributed.json} and {@code distributed.md} into the output directory.
 *
 * <pre>
 * java -cp cli/target/lms4j.jar dev.lms4j.distributed.bench.DistributedBench docs/bench
 * </pre>
 */
public final class DistributedBench {
  private static final int STEPS = 24;
  private static final int BATCH = 128;
  private static final String LAYERS = "4";
  private static final String WIDTH = "1024";
  private static final int[] WORKERS = {1, 2, 4};
  private static final int[] MIB = {1, 16, 64};
  private static final int ROUNDS = 7;

  private DistributedBench() {}

  /**
   * Runs the benchmark.
   *
   * @param args the output directory (default {@code docs/bench})
   * @throws Exception when a worker cannot start or a file cannot be written
   */
  public static void main(String[] args) throws Exception {
    Path out = Path.of(args.length > 0 ? args[0] : "docs/bench");
    Files.createDirectories(out);
    ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    ObjectNode root = json.createObjectNode();
    root.put("schema", "lms4j-bench-distributed/1");
    root.put("machine", Runtime.getRuntime().availableProcessors() + " cores, "
        + System.getProperty("os.name") + " " + System.getProperty("os.arch"));
    root.put("date", Instant.now().toString());
    root.put("load_average_at_start", loadAverage());
    root.put("command", "java -cp cli/target/lms4j.jar "
        + "dev.lms4j.distributed.bench.DistributedBench " + out);
    ArrayNode train = root.putArray("training");
    StringBuilder md = new StringBuilder();
    md.append("# Data-parallel training on this machine\n\n");
    md.append(String.format(Locale.ROOT, "`%s` on %s, %s (load average %s at the start: "
            + "the machine is shared with other jobs).%n%n", root.get("command").asText(),
        root.get("machine").asText(), root.get("date").asText(),
        root.get("load_average_at_start").asText()));
    md.append(String.format(Locale.ROOT, "## Training throughput%n%nmlp (layers=%s, width=%s), "
        + "%d steps per run (median step time of steps 3..%d), batch %d per worker, no budget, "
        + "no LMS. Each worker is its own JVM with its own gRPC server; all on 127.0.0.1.%n%n",
        LAYERS, WIDTH, STEPS, STEPS, BATCH));
    md.append("| workers | global batch | ms/step (slowest worker, median) | job samples/s | "
        + "x 1 worker |\n|---|---|---|---|---|\n");
    double base = Double.NaN;
    for (int n : WORKERS) {
      Map<Integer, JsonNode> ev = run(n, t -> List.of("train", "SPEC", Integer.toString(t),
          Integer.toString(STEPS), Integer.toString(BATCH), LAYERS, WIDTH));
      double slowest = ev.values().stream().mapToDouble(e -> e.get("ms_median").asDouble())
          .max().orElse(Double.NaN);
      double sps = n * BATCH * 1000.0 / slowest;
      if (n == 1) {
        base = sps;
      }
      ObjectNode row = train.addObject();
      row.put("workers", n).put("per_worker_batch", BATCH).put("global_batch", n * BATCH)
          .put("ms_per_step_median", slowest).put("samples_per_second", sps)
          .put("speedup", sps / base);
      md.append(String.format(Locale.ROOT, "| %d | %d | %.1f | %.0f | %.2f |%n", n, n * BATCH,
          slowest, sps, sps / base));
    }
    double loopback = loopbackGBps(256);
    root.put("loopback_tcp_gb_per_s", loopback);
    ArrayNode ar = root.putArray("allreduce");
    md.append(String.format(Locale.ROOT, "%n## All-reduce bandwidth%n%nOne "
        + "`CollectiveReduceV2` (merge Add, final Div) of a float tensor, median of %d runs "
        + "after 2 warm-ups, minus a run that only fills the tensor. algbw = size / time; busbw "
        + "= algbw x 2(n-1)/n (the bytes each worker sends in a ring all-reduce). One TCP "
        + "stream over loopback (Java sockets, 256 MiB): **%.2f GB/s**.%n%n", ROUNDS,
        loopback));
    md.append("| workers | MiB | ms (all-reduce) | ms (fill only) | algbw GB/s | busbw GB/s | "
        + "busbw / loopback |\n|---|---|---|---|---|---|---|\n");
    for (int n : new int[] {2, 4}) {
      for (int mib : MIB) {
        Map<Integer, JsonNode> ev = run(n, t -> List.of("allreduce", "SPEC",
            Integer.toString(t), Integer.toString(mib), Integer.toString(ROUNDS)));
        double ms = ev.values().stream().mapToDouble(e -> e.get("ms_median").asDouble()).max()
            .orElse(Double.NaN);
        double fill = ev.values().stream().mapToDouble(e -> e.get("fill_ms_median").asDouble())
            .max().orElse(0);
        double net = Math.max(1e-3, ms - fill);
        double alg = (mib * 1048576.0) / (net / 1000) / 1e9;
        double bus = alg * 2 * (n - 1) / n;
        ar.addObject().put("workers", n).put("mib", mib).put("ms_median", ms)
            .put("fill_ms_median", fill).put("algbw_gb_per_s", alg).put("busbw_gb_per_s", bus)
            .put("busbw_over_loopback", bus / loopback);
        md.append(String.format(Locale.ROOT, "| %d | %d | %.1f | %.1f | %.2f | %.2f | %.0f%% |%n",
            n, mib, ms, fill, alg, bus, 100 * bus / loopback));
      }
    }
    root.put("load_average_at_end", loadAverage());
    md.append(String.format(Locale.ROOT, "%nLoad average at the end: %s.%n",
        root.get("load_average_at_end").asText()));
    json.writeValue(out.resolve("distributed.json").toFile(), root);
    Files.writeString(out.resolve("distributed.md"), md.toString());
    System.out.print(md);
  }

  private interface Args {
    List<String> of(int task);
  }

  private static Map<Integer, JsonNode> run(int n, Args args) throws IOException {
    Cluster c = Cluster.local(n);
    List<List<String>> argv = new ArrayList<>();
    for (int t = 0; t < n; t++) {
      List<String> a = new ArrayList<>(args.of(t));
      a.set(1, c.spec());
      argv.add(a);
    }
    Map<Integer, JsonNode> events = new ConcurrentHashMap<>();
    WorkerGroup.Outcome o = WorkerGroup.run(BenchWorker.class.getName(), argv,
        BudgetedRunner.UNBUDGETED_MIB, Duration.ofMinutes(20), line -> { },
        (t, e) -> events.put(t, e));
    if (!o.ok() || events.size() != n) {
      throw new IOException("benchmark run with " + n + " workers failed: " + o.message());
    }
    return events;
  }

  /** One TCP stream over 127.0.0.1: {@code mib} MiB from a writer thread to a reader. */
  private static double loopbackGBps(int mib) throws Exception {
    try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Thread writer = new Thread(() -> {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), ss.getLocalPort());
             OutputStream os = s.getOutputStream()) {
          byte[] buf = new byte[1 << 20];
          for (int i = 0; i < mib; i++) {
            os.write(buf);
          }
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      });
      writer.start();
      try (Socket r = ss.accept();
           InputStream is = r.getInputStream()) {
        byte[] buf = new byte[1 << 20];
        long total = 0;
        long t0 = System.nanoTime();
        int k;
        while ((k = is.read(buf)) > 0) {
          total += k;
        }
        double s = (System.nanoTime() - t0) / 1e9;
        writer.join();
        return total / s / 1e9;
      }
    }
  }

  private static String loadAverage() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).strip().split("\\s+", 4)[0];
    } catch (IOException e) {
      return "unknown";
    }
  }
}
