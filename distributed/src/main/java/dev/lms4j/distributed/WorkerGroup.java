package dev.lms4j.distributed;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.lms4j.tf.run.WorkerProcess;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Objects;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The worker processes of a data-parallel job, started and watched together: one JVM per task,
 * each with TensorFlow's CPU allocator limited to the per-worker budget
 * ({@code TF_CPU_ALLOCATOR_USE_BFC=true}, {@code TF_CPU_BFC_MEM_LIMIT_IN_MB}), as
 * {@link WorkerProcess} runs one. When a worker fails (exits with an error, is killed, or its
 * allocator runs out of memory) the group stops the others at once, so the job ends within
 * seconds with one clear message instead of waiting for the survivors' collectives to time out.
 * On separate machines there is no such supervisor; there the step timeout of
 * {@link DataParallelTrainer.Options} (or the lost connection's gRPC error) bounds the wait.
 *
 * <p>Events: a worker's stdout lines {@code LMS4J <json>} go to {@code onEvent} with the task
 * index; its other lines go to {@code onOutput} prefixed with {@code [worker I] }.
 *
 * <pre>{@code
 * WorkerGroup.Outcome o = WorkerGroup.run(Main.class.getName(), argsPerTask, 512,
 *     Duration.ofHours(1), System.out::println, (task, event) -> ...);
 * }</pre>
 */
public final class WorkerGroup {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerGroup.class);
  private static final String OOM_LINE = "ran out of memory trying to allocate";

  private WorkerGroup() {}

  /**
   * How the group ended.
   *
   * @param ok         every worker exited with code 0
   * @param failedTask the task whose failure ended the job, or -1
   * @param exitCode   that worker's exit code (-1 when it was stopped), 0 when ok
   * @param oom        the failed worker ran out of memory under its budget
   * @param message    a one-line description of the failure, null when ok
   * @param pids       the workers' process ids, in task order
   */
  public record Outcome(boolean ok, int failedTask, int exitCode, boolean oom, String message,
      List<Long> pids) {}

  /**
   * Starts one worker JVM per entry of {@code argsPerTask} ({@code mainClass} on this JVM's class
   * path) and waits for all of them, stopping the others when one fails.
   *
   * @param mainClass   the workers' main class
   * @param argsPerTask each task's arguments, in task order
   * @param budgetMib   the per-worker allocator limit in MiB
   * @param timeout     how long the whole job may take
   * @param onOutput    the workers' other output lines, prefixed
   * @param onEvent     each worker's events, with its task index
   * @return the outcome
   * @throws IOException when a worker cannot be started
   */
  public static Outcome run(String mainClass, List<List<String>> argsPerTask, long budgetMib,
      Duration timeout, Consumer<String> onOutput, BiConsumer<Integer, JsonNode> onEvent)
      throws IOException {
    List<Integer> tasks = new ArrayList<>();
    for (int t = 0; t < argsPerTask.size(); t++) {
      tasks.add(t);
    }
    return run(mainClass, argsPerTask, tasks, budgetMib, timeout, onOutput, onEvent);
  }

  /**
   * As {@link #run(String, List, long, Duration, Consumer, BiConsumer)} for processes that are
   * the tasks {@code tasks} of a larger cluster (on a real cluster: this machine's one task);
   * output prefixes, events and messages name those task indices.
   *
   * @param mainClass   the workers' main class
   * @param argsPerTask each process's arguments
   * @param tasks       the task index of each process
   * @param budgetMib   the per-worker allocator limit in MiB
   * @param timeout     how long the whole job may take
   * @param onOutput    the workers' other output lines, prefixed
   * @param onEvent     each worker's events, with its task index
   * @return the outcome ({@link Outcome#failedTask()} is a task index)
   * @throws IOException when a worker cannot be started
   */
  public static Outcome run(String mainClass, List<List<String>> argsPerTask,
      List<Integer> tasks, long budgetMib, Duration timeout, Consumer<String> onOutput,
      BiConsumer<Integer, JsonNode> onEvent) throws IOException {
    if (tasks.size() != argsPerTask.size()) {
      throw new IllegalArgumentException("one task index per process");
    }
    Objects.requireNonNull(onOutput, "onOutput");
    Objects.requireNonNull(onEvent, "onEvent");
    int n = argsPerTask.size();
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    List<Process> procs = new ArrayList<>();
    List<Thread> readers = new ArrayList<>();
    List<Deque<String>> tails = new ArrayList<>();
    String[] oom = new String[n];
    ObjectMapper json = new ObjectMapper();
    try {
      for (int t = 0; t < n; t++) {
        List<String> cmd = new ArrayList<>(List.of(java, "-Xmx1g", "-XX:+UseSerialGC",
            WorkerProcess.errorFileOption(), "-cp",
            System.getProperty("java.class.path"), mainClass));
        cmd.addAll(argsPerTask.get(t));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().put("TF_CPU_ALLOCATOR_USE_BFC", "true");
        pb.environment().put("TF_CPU_BFC_MEM_LIMIT_IN_MB", Long.toString(budgetMib));
        pb.environment().putIfAbsent("TF_CPP_MIN_LOG_LEVEL", "1");
        Process p = pb.start();
        procs.add(p);
        Deque<String> tail = new ArrayDeque<>();
        tails.add(tail);
        int slot = t;
        int task = tasks.get(t);
        String prefix = "[worker " + task + "] ";
        Thread out = new Thread(() -> {
          try (BufferedReader r = new BufferedReader(
              new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
              if (line.startsWith(WorkerProcess.PREFIX)) {
                onEvent.accept(task, json.readTree(line.substring(WorkerProcess.PREFIX.length())));
              } else {
                onOutput.accept(prefix + line);
              }
            }
          } catch (IOException e) {
            LOG.debug("worker {} stdout closed: {}", task, e.toString());
          }
        }, "lms4j-worker-" + t + "-out");
        Thread err = new Thread(() -> {
          try (BufferedReader r = new BufferedReader(
              new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
              LOG.debug("worker {}: {}", task, line);
              synchronized (tail) {
                tail.addLast(line);
                if (tail.size() > 40) {
                  tail.removeFirst();
                }
              }
              if (line.contains(OOM_LINE) && !line.contains("not a failure")) {
                synchronized (oom) {
                  if (oom[slot] == null) {
                    oom[slot] = line.substring(line.indexOf(OOM_LINE));
                  }
                }
                p.destroyForcibly();
              }
            }
          } catch (IOException e) {
            LOG.debug("worker {} stderr closed: {}", task, e.toString());
          }
        }, "lms4j-worker-" + t + "-err");
        out.start();
        err.start();
        readers.add(out);
        readers.add(err);
      }
      List<Long> pids = procs.stream().map(Process::pid).toList();
      long deadline = System.nanoTime() + timeout.toNanos();
      int failed = -1;
      boolean timedOut = false;
      boolean graceTaken = false;
      while (true) {
        boolean allDone = true;
        for (int t = 0; t < n; t++) {
          Process p = procs.get(t);
          if (p.isAlive()) {
            allDone = false;
          } else if (p.exitValue() != 0 && (failed < 0
              || rootCauseRank(p.exitValue(), oom, t) > rootCauseRank(
                  procs.get(failed).exitValue(), oom, failed))) {
            // when one worker dies, its peers fail soon after ("connection reset"): of the
            // workers found dead together, name the one that caused it
            failed = t;
          }
        }
        if (failed >= 0 && rootCauseRank(procs.get(failed).exitValue(), oom, failed) == 0
            && !graceTaken && n > 1) {
          // a plain exit may be a peer's reaction to a death not yet reaped: look once more
          graceTaken = true;
          Thread.sleep(500);
          continue;
        }
        if (failed >= 0 || allDone) {
          break;
        }
        if (System.nanoTime() > deadline) {
          timedOut = true;
          break;
        }
        Thread.sleep(100);
      }
      for (Process p : procs) {
        if (p.isAlive()) {
          p.destroyForcibly();
        }
      }
      for (Process p : procs) {
        p.waitFor();
      }
      for (Thread r : readers) {
        r.join(5000);
      }
      if (timedOut) {
        return new Outcome(false, -1, -1, false, "the job timed out after "
            + timeout.toSeconds() + " s; stopped all workers", pids);
      }
      if (failed < 0) {
        return new Outcome(true, -1, 0, false, null, pids);
      }
      int code = procs.get(failed).exitValue();
      String what;
      boolean isOom;
      synchronized (oom) {
        isOom = oom[failed] != null;
        what = isOom ? "ran out of memory under its budget of " + budgetMib + " MiB ("
            + oom[failed] + ")" : describe(code, tails.get(failed));
      }
      Path report = WorkerProcess.crashReport(procs.get(failed).pid());
      if (report != null) {
        what += "; JVM crash report: " + report;
      }
      String others = n > 1 ? "; stopped the other " + (n - 1) + " worker" + (n > 2 ? "s" : "")
          : "";
      return new Outcome(false, tasks.get(failed), isOom ? -1 : code, isOom, "worker "
          + tasks.get(failed) + " " + what + others, pids);
    } catch (InterruptedException e) {
      procs.forEach(Process::destroyForcibly);
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while waiting for the workers", e);
    } catch (IOException | RuntimeException e) {
      procs.forEach(Process::destroyForcibly);
      throw e;
    }
  }

  /**
   * How likely a dead worker is the cause of a job's failure rather than a peer that noticed it:
   * out of memory first, then killed by a signal, then any other exit.
   */
  private static int rootCauseRank(int code, String[] oom, int slot) {
    synchronized (oom) {
      if (oom[slot] != null) {
        return 2;
      }
    }
    return code > 128 ? 1 : 0;
  }

  /** Why a worker ended: its exit code and its last "lms4j:" line (or last line). */
  private static String describe(int code, Deque<String> tail) {
    String last = null;
    synchronized (tail) {
      for (String line : tail) {
        if (line.startsWith("lms4j: ")) {
          last = line.substring("lms4j: ".length());
          break;
        }
      }
      if (last == null && !tail.isEmpty()
          && !tail.peekLast().matches("^\\d\\d:\\d\\d:\\d\\d\\.\\d+ +(INFO|DEBUG|TRACE) .*")) {
        last = tail.peekLast();
      }
    }
    String how = code > 128 ? "was killed (signal " + (code - 128) + ")"
        : "exited with code " + code;
    String msg = how + (last == null || last.isBlank() ? "" : ": " + last.strip());
    return msg.length() > 600 ? msg.substring(0, 600) + "..." : msg;
  }
}
