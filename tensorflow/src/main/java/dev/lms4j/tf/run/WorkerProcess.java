package dev.lms4j.tf.run;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A worker JVM whose TensorFlow CPU allocator is a BFC allocator limited to a budget
 * ({@code TF_CPU_ALLOCATOR_USE_BFC=true}, {@code TF_CPU_BFC_MEM_LIMIT_IN_MB}). The limit is per
 * process, which is why each budgeted run gets its own JVM. The worker reports events as lines
 * {@code LMS4J <json>} on stdout; everything else it prints is logged at debug level.
 *
 * <p>TensorFlow's allocator waits up to 10 s for memory when an allocation fails, then logs
 * "ran out of memory trying to allocate" and fails the op; a worker whose ops run one at a time
 * preloads lms4j's {@link AllocatorRetry}, which leaves out that wait when nothing can free memory
 * in it. The supervisor stops the worker when it sees that line (unless the caller may fail the
 * allocation) and reports an OOM at once. A crash
 * of the worker (oneDNN can segfault after an OOM) is reported with the worker's last lines.
 *
 * <p>With {@code LMS4J_BFC_DUMP=FILE} in this process's environment, the worker logs at INFO
 * level and is stopped only once the allocator has dumped its state after the failed
 * allocation: the dump is appended to FILE and its summary ({@link BfcDump#describe}: regions,
 * bytes in use against bytes requested, the largest free chunk) ends the OOM message. With
 * {@code LMS4J_BFC_LOG=FILE} ({@link AllocatorLog#ENV}), TensorFlow logs every request of the
 * budgeted allocator and the op it ran for; the log is written to FILE (one line per request,
 * {@link AllocatorLog#write}) and whether lms4j's allocator model places those requests as
 * TensorFlow did is logged ({@link AllocatorLog#check}). The runs are slower (minutes for a
 * graph of a few thousand ops): TensorFlow logs its whole chunk map at every request.
 *
 * <p>The worker dies with this process: it runs through {@link WorkerMain}, which ends it when
 * its stdin pipe (held only by this process) closes or this process's pid ends, so a
 * {@code kill -9} of the parent stops the worker within a second; a shutdown hook here stops
 * it at once on SIGINT (Ctrl-C) and SIGTERM.
 *
 * <pre>{@code
 * WorkerProcess.Outcome o = WorkerProcess.run(StepWorker.class.getName(), args, 512,
 *     Duration.ofMinutes(10), event -> ...);
 * }</pre>
 */
public final class WorkerProcess {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerProcess.class);
  /** Prefix of event lines on the worker's stdout. */
  public static final String PREFIX = "LMS4J ";
  private static final String OOM_LINE = "ran out of memory trying to allocate";
  /** Environment variable naming a file that keeps the allocator's dump at an OOM. */
  public static final String DUMP_ENV = "LMS4J_BFC_DUMP";

  private WorkerProcess() {}

  /**
   * How a worker ended.
   *
   * @param oom      the supervisor saw the allocator run out of memory and stopped the worker
   * @param finished the worker exited before the timeout
   * @param exitCode its exit code (-1 when it was stopped)
   * @param message  the OOM line, or a description of a crash or timeout with the worker's last
   *                 lines; null for a normal exit
   */
  public record Outcome(boolean oom, boolean finished, int exitCode, String message) {}

  /**
   * Runs {@code mainClass} with {@code args} on this JVM's class path under {@code budgetMib}.
   *
   * @param onEvent receives each event's JSON, in order, on a reader thread
   */
  public static Outcome run(String mainClass, List<String> args, long budgetMib,
      Duration timeout, Consumer<JsonNode> onEvent) throws IOException {
    return run(mainClass, args, budgetMib, timeout, onEvent, line -> LOG.debug("worker: {}", line));
  }

  /**
   * As {@link #run(String, List, long, Duration, Consumer)}, passing every other stdout line to
   * {@code onOutput} (e.g. to show the worker's own output to the user).
   */
  public static Outcome run(String mainClass, List<String> args, long budgetMib,
      Duration timeout, Consumer<JsonNode> onEvent, Consumer<String> onOutput)
      throws IOException {
    return run(mainClass, args, budgetMib, timeout, onEvent, onOutput, false);
  }

  /**
   * As {@link #run(String, List, long, Duration, Consumer, Consumer)}. With {@code serialOps}
   * the caller promises that the worker's sessions run their ops one at a time in the calling
   * thread ({@code inter_op_parallelism_threads = -1}, as {@link dev.lms4j.tf.SessionConfigs#lms}
   * has it): the worker then preloads lms4j's allocator retry ({@link AllocatorRetry}), and a
   * failed allocation fails at once instead of after TensorFlow's 10 s wait for memory no other
   * op can free. Where ops run in parallel another op may free memory in that wait: pass false.
   */
  public static Outcome run(String mainClass, List<String> args, long budgetMib,
      Duration timeout, Consumer<JsonNode> onEvent, Consumer<String> onOutput, boolean serialOps)
      throws IOException {
    String dumpTo = System.getenv(DUMP_ENV);
    return run(mainClass, args, budgetMib, timeout, onEvent, onOutput,
        dumpTo == null || dumpTo.isBlank() ? null : Path.of(dumpTo), serialOps);
  }

  /** As above; at an OOM the allocator's dump is appended to {@code dumpTo} unless null. */
  static Outcome run(String mainClass, List<String> args, long budgetMib, Duration timeout,
      Consumer<JsonNode> onEvent, Consumer<String> onOutput, Path dumpTo, boolean serialOps)
      throws IOException {
    String logTo = System.getenv(AllocatorLog.ENV);
    return run(mainClass, args, budgetMib, timeout, onEvent, onOutput, dumpTo,
        logTo == null || logTo.isBlank() ? null : Path.of(logTo), serialOps);
  }

  /**
   * As above; the allocator's log ({@link AllocatorLog}) is written to {@code logTo} unless
   * null.
   */
  static Outcome run(String mainClass, List<String> args, long budgetMib, Duration timeout,
      Consumer<JsonNode> onEvent, Consumer<String> onOutput, Path dumpTo, Path logTo,
      boolean serialOps) throws IOException {
    boolean dump = dumpTo != null;
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    List<String> cmd = new ArrayList<>(List.of(java, "-Xmx1g", "-XX:+UseSerialGC",
        errorFileOption(), "-D" + WorkerMain.PARENT_PID + "=" + ProcessHandle.current().pid(),
        "-cp", System.getProperty("java.class.path"), WorkerMain.class.getName(), mainClass));
    cmd.addAll(args);
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().put("TF_CPU_ALLOCATOR_USE_BFC", "true");
    pb.environment().put("TF_CPU_BFC_MEM_LIMIT_IN_MB", Long.toString(budgetMib));
    // the dump is logged at INFO level
    pb.environment().putIfAbsent("TF_CPP_MIN_LOG_LEVEL", dump ? "0" : "1");
    AllocatorLog.Reader allocations = logTo == null ? null : new AllocatorLog.Reader();
    if (allocations != null) {
      pb.environment().putAll(AllocatorLog.TF_ENV);
    }
    Path retry = serialOps ? AllocatorRetry.library() : null;
    if (retry != null) {
      String preload = pb.environment().get("LD_PRELOAD");
      pb.environment().put("LD_PRELOAD", preload == null || preload.isBlank() ? retry.toString()
          : retry + ":" + preload);
    }
    LOG.debug("worker {}: budget {} MiB{}", mainClass, budgetMib,
        retry != null ? ", allocator retry preloaded" : "");
    // the worker's stdin stays an open pipe that only this process writes to: when this
    // process dies, however, the pipe closes and WorkerMain ends the worker
    Process p = pb.start();
    Thread stopWorker = new Thread(() -> stop(p), "lms4j-stop-worker");
    Runtime.getRuntime().addShutdownHook(stopWorker);
    AtomicBoolean oomSeen = new AtomicBoolean();
    String[] oomMessage = {null};
    Deque<String> tail = new ArrayDeque<>();
    List<String> dumped = new ArrayList<>();
    ObjectMapper json = new ObjectMapper();
    Thread out = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          if (line.startsWith(PREFIX)) {
            onEvent.accept(json.readTree(line.substring(PREFIX.length())));
          } else {
            onOutput.accept(line);
          }
        }
      } catch (IOException e) {
        LOG.debug("worker stdout closed: {}", e.toString());
      }
    }, "lms4j-worker-out");
    Thread err = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          LOG.debug("worker: {}", line);
          if (allocations != null) {
            allocations.accept(line);
          }
          synchronized (tail) {
            tail.addLast(line);
            if (tail.size() > 40) {
              tail.removeFirst();
            }
          }
          // "The caller indicates that this is not a failure" marks allocations that may fail
          // (the op falls back), so only other lines mean the step is doomed
          if (!dumped.isEmpty()) { // the allocator's dump after the OOM line
            dumped.add(line);
            if (BfcDump.isEnd(line)) {
              p.destroyForcibly();
            }
          } else if (line.contains(OOM_LINE) && !line.contains("not a failure")
              && oomSeen.compareAndSet(false, true)) {
            oomMessage[0] = line.substring(line.indexOf(OOM_LINE));
            if (dump) {
              dumped.add(line);
            } else {
              p.destroyForcibly();
            }
          }
        }
      } catch (IOException e) {
        LOG.debug("worker stderr closed: {}", e.toString());
      }
    }, "lms4j-worker-err");
    out.start();
    err.start();
    boolean finished;
    try {
      finished = p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
      if (!finished) {
        p.destroyForcibly();
        p.waitFor();
      }
      out.join();
      err.join();
    } catch (InterruptedException e) {
      p.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while waiting for the worker", e);
    } finally {
      try {
        Runtime.getRuntime().removeShutdownHook(stopWorker);
      } catch (IllegalStateException e) {
        // this JVM is shutting down: the hook stops the worker
      }
    }
    if (allocations != null) {
      keepAllocations(logTo, budgetMib, allocations.log());
    }
    if (oomSeen.get()) {
      String message = oomMessage[0];
      if (dump) {
        message = keepDump(dumpTo, budgetMib, dumped, message);
      }
      return new Outcome(true, finished, -1, message);
    }
    if (!finished) {
      return new Outcome(false, false, -1, "worker timed out after " + timeout.toSeconds() + " s");
    }
    int code = p.exitValue();
    String msg = null;
    if (code != 0) {
      synchronized (tail) {
        msg = "worker exited with code " + code + (code > 128 ? " (killed by signal "
            + (code - 128) + ")" : "") + "; last output: "
            + String.join(" | ", tail).replaceAll("\\s+", " ");
      }
      if (msg.length() > 2000) {
        msg = msg.substring(0, 2000) + "...";
      }
      Path report = crashReport(p.pid());
      if (report != null) {
        msg += "; JVM crash report: " + report;
      }
    }
    return new Outcome(false, true, code, msg);
  }

  /**
   * Writes the allocator's log ({@link AllocatorLog#write}) to {@code file} and logs whether
   * the allocator model places its requests as TensorFlow did.
   */
  private static void keepAllocations(Path file, long budgetMib, AllocatorLog log) {
    try {
      log.write(file);
      AllocatorLog.Check c = log.check(budgetMib << 20);
      LOG.info("[LMS] allocator log ({} MiB, {} regions): {}; written to {}", budgetMib,
          log.regions().size(), c.detail(), file);
    } catch (IOException e) {
      LOG.warn("could not write the allocator's log to {}: {}", file, e.toString());
    }
  }

  /** Appends the dump to {@code file}; the OOM message with the dump's summary. */
  private static String keepDump(Path file, long budgetMib, List<String> dumped, String message) {
    BfcDump d = BfcDump.parse(dumped);
    List<String> lines = new ArrayList<>(dumped.size() + 1);
    lines.add("== lms4j worker under " + budgetMib + " MiB: " + message);
    lines.addAll(dumped);
    try {
      Files.write(file, lines, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
          StandardOpenOption.APPEND);
    } catch (IOException e) {
      LOG.warn("could not write the allocator's dump to {}: {}", file, e.toString());
    }
    return d == null ? message : message + "; " + d.describe();
  }

  /**
   * The JVM option that sends a worker's crash report ({@code hs_err_pid<pid>.log}, written when
   * a native kernel segfaults, as oneDNN can after an OOM) to the temporary directory instead
   * of the user's working directory.
   */
  public static String errorFileOption() {
    return "-XX:ErrorFile=" + crashReportPath("%p"); // the JVM puts the worker's pid for %p
  }

  /**
   * The crash report a worker with this pid left ({@link #errorFileOption}), or null (also for
   * the workers of a distributed job, which get the same option).
   */
  public static Path crashReport(long pid) {
    Path report = crashReportPath(Long.toString(pid));
    return Files.isRegularFile(report) ? report : null;
  }

  private static Path crashReportPath(String pid) {
    return Path.of(System.getProperty("java.io.tmpdir"), "lms4j-worker-hs_err_pid" + pid + ".log");
  }

  /** Stops a worker when this JVM shuts down (SIGINT, SIGTERM, System.exit elsewhere). */
  private static void stop(Process p) {
    if (!p.isAlive()) {
      return;
    }
    p.destroyForcibly();
    try {
      p.waitFor(3, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
