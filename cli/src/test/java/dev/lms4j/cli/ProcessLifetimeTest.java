package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The budgeted worker dies with the {@code lms4j} process that started it: a real parent JVM
 * ({@code lms4j train}) is started, its worker found among its children once it trains, the
 * parent signalled, and the worker must be gone within 5 s. Killing the worker instead ends the
 * parent with exit 1 and a report.
 */
class ProcessLifetimeTest {
  @TempDir Path dir;
  private final List<ProcessHandle> started = new ArrayList<>();

  @AfterEach
  void killLeftovers() throws Exception {
    List<ProcessHandle> all = new ArrayList<>();
    for (ProcessHandle h : started) {
      h.descendants().forEach(all::add);
      all.add(h);
    }
    all.forEach(ProcessHandle::destroyForcibly);
    // gone before the test's directory (their temporary files) is removed
    for (ProcessHandle h : all) {
      h.onExit().get(30, java.util.concurrent.TimeUnit.SECONDS);
    }
  }

  /** A parent running {@code lms4j ARGS} with its stdout lines in a queue. */
  private record Parent(Process process, BlockingQueue<String> lines) {
    /** Waits for a line containing {@code text}; fails after 90 s or when the parent ends. */
    void await(String text) throws Exception {
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
      while (System.nanoTime() < end) {
        String l = lines.poll(200, TimeUnit.MILLISECONDS);
        if (l != null && l.contains(text)) {
          return;
        }
        if (l == null && !process.isAlive() && lines.isEmpty()) {
          throw new AssertionError("the parent ended (" + process.exitValue() + ") before '"
              + text + "'");
        }
      }
      throw new TimeoutException("no line with '" + text + "'");
    }

    /** The one worker JVM the parent started. */
    ProcessHandle worker() {
      List<ProcessHandle> kids = process.toHandle().children().filter(ProcessHandle::isAlive)
          .toList();
      assertThat(kids).as("worker processes of the parent").hasSize(1);
      return kids.get(0);
    }
  }

  private Parent start(String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of("env", "--default-signal=INT",
        Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx512m",
        // the run directory a killed parent cannot remove lands in the test's own directory
        "-Djava.io.tmpdir=" + dir, "-cp",
        System.getProperty("java.class.path"), Main.class.getName()));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Process p = pb.start();
    started.add(p.toHandle());
    BlockingQueue<String> q = new LinkedBlockingQueue<>();
    Thread t = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String l;
        while ((l = r.readLine()) != null) {
          q.add(l);
        }
      } catch (java.io.IOException e) {
        // the parent is gone
      }
    });
    t.setDaemon(true);
    t.start();
    return new Parent(p, q);
  }

  /** {@code train --steps}: the BudgetedRunner's StepWorker, printing each step. */
  private Parent stepsRun() throws Exception {
    Parent p = start("train", "--model", "mlp", "--batch", "32", "-o", "layers=2", "-o",
        "width=64", "--budget", "512MiB", "--lms", "off", "--steps", "1000000");
    p.await("step 3/1000000");
    return p;
  }

  /** {@code train --epochs}: this command run again in the worker, the trainer inside. */
  private Parent trainerRun() throws Exception {
    Parent p = start("train", "--model", "mlp", "--batch", "32", "-o", "layers=2", "-o",
        "width=64", "--budget", "512MiB", "--lms", "off", "--epochs", "1000000",
        "--synthetic-size", "64");
    p.await("epoch 2/1000000");
    return p;
  }

  private static void signal(Process p, String sig) throws Exception {
    Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(p.pid())).start();
    assertThat(k.waitFor()).isZero();
  }

  private static void assertEndsWithin5s(ProcessHandle worker) throws Exception {
    try {
      worker.onExit().get(5, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      throw new AssertionError("the worker " + worker.pid() + " outlived its parent by 5 s");
    }
    assertThat(worker.isAlive()).isFalse();
  }

  @Test
  void sigkillOfTheParentEndsTheWorker() throws Exception {
    Parent p = stepsRun();
    ProcessHandle worker = p.worker();
    started.add(worker);
    signal(p.process(), "KILL");
    assertThat(p.process().waitFor(5, TimeUnit.SECONDS)).isTrue();
    assertEndsWithin5s(worker);
  }

  @Test
  void sigtermOfTheParentEndsTheWorker() throws Exception {
    Parent p = stepsRun();
    ProcessHandle worker = p.worker();
    started.add(worker);
    signal(p.process(), "TERM");
    assertEndsWithin5s(worker);
    assertThat(p.process().waitFor(5, TimeUnit.SECONDS)).isTrue();
  }

  @Test
  void ctrlCStopsTheTraining() throws Exception {
    Parent p = trainerRun();
    ProcessHandle worker = p.worker();
    started.add(worker);
    signal(p.process(), "INT");
    assertEndsWithin5s(worker);
    assertThat(p.process().waitFor(5, TimeUnit.SECONDS)).isTrue();
    assertThat(p.process().exitValue()).isNotZero();
  }

  @Test
  void killingTheWorkerEndsTheParentWithExit1AndAReport() throws Exception {
    Path report = dir.resolve("r.json");
    Parent p = start("train", "--model", "mlp", "--batch", "32", "-o", "layers=2", "-o",
        "width=64", "--budget", "512MiB", "--lms", "off", "--steps", "1000000", "--report",
        report.toString());
    p.await("step 3/1000000");
    p.worker().destroyForcibly();
    assertThat(p.process().waitFor(30, TimeUnit.SECONDS)).isTrue();
    assertThat(p.process().exitValue()).isEqualTo(1);
    JsonNode r = new ObjectMapper().readTree(report.toFile());
    assertThat(r.get("error").asText()).contains("killed by signal 9");
  }
}
