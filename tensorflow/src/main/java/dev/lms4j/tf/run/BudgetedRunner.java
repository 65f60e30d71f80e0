package dev.lms4j.tf.run;

import dev.lms4j.tf.TrainingGraph;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.RewriterConfig;

/**
 * Runs training steps of a graph in a {@link WorkerProcess} (a JVM whose TensorFlow allocator is
 * limited to the budget) and collects per-step losses and times, the measured peak, or the OOM.
 *
 * <pre>{@code
 * RunResult r = BudgetedRunner.run(trainingGraph, BudgetedRunner.Options.of(256L << 20, 5));
 * }</pre>
 */
public final class BudgetedRunner {
  private static final Logger LOG = LoggerFactory.getLogger(BudgetedRunner.class);
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

    /** The same options with another timeout. */
    public Options withTimeout(Duration t) {
      return new Options(budgetBytes, steps, seed, deterministic, memOpt, t);
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
      List<StepRecord> steps = Collections.synchronizedList(new ArrayList<>());
      long[] peak = {-1};
      long[] withScratch = {-1};
      String[] allocator = {"none"};
      String[] event = {null};
      Map<String, Long> scratch = new java.util.concurrent.ConcurrentHashMap<>();
      String[] message = {null};
      WorkerProcess.Outcome w = WorkerProcess.run(StepWorker.class.getName(), List.of(
          pb.toString(), mf.toString(), Integer.toString(o.steps()), Long.toString(o.seed()),
          Boolean.toString(o.deterministic()), o.memOpt().name()), o.budgetMib(), o.timeout(),
          n -> {
            String ev = n.get("event").asText();
            switch (ev) {
              case "step" -> {
                StepRecord rec = new StepRecord(n.get("step").asInt(), n.get("loss").asDouble(),
                    n.get("ms").asDouble(), n.path("traced").asBoolean());
                steps.add(rec);
                onStep.accept(rec);
              }
              case "done" -> {
                peak[0] = n.get("peak_bytes").asLong();
                withScratch[0] = n.path("peak_with_scratch_bytes").asLong(-1);
                n.path("scratch").fields().forEachRemaining(e ->
                    scratch.put(e.getKey(), e.getValue().asLong()));
                allocator[0] = n.get("allocator").asText();
                event[0] = ev;
              }
              default -> {
                event[0] = ev;
                message[0] = n.path("message").asText();
              }
            }
          }, line -> LOG.debug("worker: {}", line), o.deterministic());
      if ("done".equals(event[0])) {
        return new RunResult(true, false, steps, peak[0],
            "RunMetadata step stats (FULL_TRACE, step 2, or 1 when it is the only one): max "
                + "allocator_bytes_in_use of "
                + allocator[0], null, scratch, withScratch[0]);
      }
      if (w.oom() || "oom".equals(event[0])) {
        return new RunResult(false, true, steps, -1, "none", "OOM under a budget of "
            + o.budgetMib() + " MiB: " + (w.oom() ? w.message() : message[0]));
      }
      String why = message[0] != null ? message[0] : w.message();
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
