package dev.lms4j.tf.run;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.lms4j.tf.TrainingGraph;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.RewriterConfig;

/**
 * Runs training steps in a separate worker JVM whose TensorFlow CPU allocator is a BFC allocator
 * limited to the budget ({@code TF_CPU_ALLOCATOR_USE_BFC=true},
 * {@code TF_CPU_BFC_MEM_LIMIT_IN_MB}). The limit is per process, which is why each budgeted run
 * gets its own JVM; a crash of the worker (oneDNN can segfault after an OOM) is a failed run.
 *
 * <p>The allocator logs "ran out of memory trying to allocate" as soon as an allocation fails and
 * then retries for about 10 s before the op fails; the runner stops the worker when it sees that
 * line and reports an OOM at once.
 */
public final class BudgetedRunner {
  private static final Logger LOG = LoggerFactory.getLogger(BudgetedRunner.class);
  private static final String OOM_LINE = "ran out of memory trying to allocate";
  /** The limit used for "unbudgeted" runs: the BFC allocator is on so its statistics exist. */
  public static final long UNBUDGETED_MIB = 16_384;

  private BudgetedRunner() {}

  /**
   * How to run.
   *
   * @param budgetBytes   device budget; {@code <= 0} means unbudgeted
   * @param steps         training steps
   * @param seed          seed of the synthetic feeds
   * @param deterministic run ops in the caller's thread (fixed order, bit-identical losses)
   * @param memOpt        grappler's memory optimizer mode
   * @param timeout       how long the worker may take
   */
  public record Options(long budgetBytes, int steps, long seed, boolean deterministic,
      RewriterConfig.MemOptType memOpt, Duration timeout) {
    /** Defaults: {@code steps} steps, seed 42, deterministic, grappler's default, 15 minutes. */
    public static Options of(long budgetBytes, int steps) {
      return new Options(budgetBytes, steps, 42, true, RewriterConfig.MemOptType.DEFAULT_MEM_OPT,
          Duration.ofMinutes(15));
    }

    /** The budget in whole MiB as the environment variable takes it. */
    public long budgetMib() {
      return budgetBytes <= 0 ? UNBUDGETED_MIB : Math.max(1, budgetBytes >> 20);
    }
  }

  /** Runs {@code tg} under the options; never throws for OOM or a worker crash. */
  public static RunResult run(TrainingGraph tg, Options o) throws IOException {
    return run(tg, o, s -> { });
  }

  /** As {@link #run(TrainingGraph, Options)}, passing each step to {@code onStep} as it ends. */
  public static RunResult run(TrainingGraph tg, Options o, Consumer<StepRecord> onStep)
      throws IOException {
    Path dir = Files.createTempDirectory("lms4j-run");
    try {
      Path pb = dir.resolve("graph.pb");
      Path mf = dir.resolve("manifest.json");
      tg.write(pb, mf);
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      List<String> cmd = List.of(java, "-Xmx1g", "-XX:+UseSerialGC", "-cp",
          System.getProperty("java.class.path"), StepWorker.class.getName(), pb.toString(),
          mf.toString(), Integer.toString(o.steps()), Long.toString(o.seed()),
          Boolean.toString(o.deterministic()), o.memOpt().name());
      ProcessBuilder pbld = new ProcessBuilder(cmd);
      pbld.environment().put("TF_CPU_ALLOCATOR_USE_BFC", "true");
      pbld.environment().put("TF_CPU_BFC_MEM_LIMIT_IN_MB", Long.toString(o.budgetMib()));
      pbld.environment().putIfAbsent("TF_CPP_MIN_LOG_LEVEL", "1");
      LOG.debug("worker: budget {} MiB, {} steps", o.budgetMib(), o.steps());
      Process p = pbld.start();
      List<StepRecord> steps = Collections.synchronizedList(new ArrayList<>());
      long[] peak = {-1};
      String[] allocator = {"none"};
      String[] event = {null};
      String[] message = {null};
      AtomicBoolean oomSeen = new AtomicBoolean();
      Deque<String> tail = new ArrayDeque<>();
      ObjectMapper json = new ObjectMapper();
      Thread outReader = new Thread(() -> {
        try (BufferedReader r = new BufferedReader(
            new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
          String line;
          while ((line = r.readLine()) != null) {
            if (!line.startsWith(StepWorker.PREFIX)) {
              LOG.debug("worker: {}", line);
              continue;
            }
            JsonNode n = json.readTree(line.substring(StepWorker.PREFIX.length()));
            String ev = n.get("event").asText();
            switch (ev) {
              case "step" -> {
                StepRecord rec = new StepRecord(n.get("step").asInt(), n.get("loss").asDouble(),
                    n.get("ms").asDouble());
                steps.add(rec);
                onStep.accept(rec);
              }
              case "done" -> {
                peak[0] = n.get("peak_bytes").asLong();
                allocator[0] = n.get("allocator").asText();
                event[0] = ev;
              }
              default -> {
                event[0] = ev;
                message[0] = n.path("message").asText();
              }
            }
          }
        } catch (IOException e) {
          LOG.debug("worker stdout closed: {}", e.toString());
        }
      }, "lms4j-worker-out");
      Thread errReader = new Thread(() -> {
        try (BufferedReader r = new BufferedReader(
            new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
          String line;
          while ((line = r.readLine()) != null) {
            LOG.debug("worker: {}", line);
            synchronized (tail) {
              tail.addLast(line);
              if (tail.size() > 40) {
                tail.removeFirst();
              }
            }
            // "The caller indicates that this is not a failure" marks allocations that may fail
            // (the op falls back), so only other lines mean the step is doomed
            if (line.contains(OOM_LINE) && !line.contains("not a failure")
                && oomSeen.compareAndSet(false, true)) {
              message[0] = line.substring(line.indexOf(OOM_LINE));
              p.destroyForcibly();
            }
          }
        } catch (IOException e) {
          LOG.debug("worker stderr closed: {}", e.toString());
        }
      }, "lms4j-worker-err");
      outReader.start();
      errReader.start();
      boolean finished;
      try {
        finished = p.waitFor(o.timeout().toMillis(), TimeUnit.MILLISECONDS);
        if (!finished) {
          p.destroyForcibly();
          p.waitFor();
        }
        outReader.join();
        errReader.join();
      } catch (InterruptedException e) {
        p.destroyForcibly();
        Thread.currentThread().interrupt();
        throw new IOException("interrupted while waiting for the worker", e);
      }
      if ("done".equals(event[0])) {
        return new RunResult(true, false, steps, peak[0],
            "RunMetadata step stats (FULL_TRACE, step 1): max allocator_bytes_in_use of "
                + allocator[0], null);
      }
      if (oomSeen.get() || "oom".equals(event[0])) {
        return new RunResult(false, true, steps, -1, "none",
            "OOM under a budget of " + o.budgetMib() + " MiB: " + message[0]);
      }
      String why;
      if (!finished) {
        why = "worker timed out after " + o.timeout().toSeconds() + " s";
      } else if (message[0] != null) {
        why = message[0];
      } else {
        synchronized (tail) {
          why = "worker exited with code " + p.exitValue() + (p.exitValue() > 128
              ? " (killed by signal " + (p.exitValue() - 128) + ")" : "")
              + "; last output: " + String.join(" | ", tail).replaceAll("\\s+", " ");
        }
        if (why.length() > 2000) {
          why = why.substring(0, 2000) + "...";
        }
      }
      return new RunResult(false, false, steps, -1, "none", why);
    } finally {
      deleteTree(dir);
    }
  }

  private static void deleteTree(Path dir) {
    try (var s = Files.walk(dir)) {
      s.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      LOG.debug("could not delete {}: {}", dir, e.toString());
    }
  }
}
