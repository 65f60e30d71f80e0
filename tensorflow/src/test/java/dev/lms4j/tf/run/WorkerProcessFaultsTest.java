package dev.lms4j.tf.run;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * How {@link WorkerProcess} reports a worker that dies, hangs or runs out of memory, with fake
 * worker mains (no TensorFlow) in place of {@link StepWorker}: a hard exit and a kill by a
 * signal are failed runs carrying the worker's last lines; a hang ends at the timeout with the
 * worker stopped; the allocator's "ran out of memory trying to allocate" line stops a worker at
 * once and is reported as an OOM, while the same line marked "not a failure" is ignored; a native
 * crash leaves its JVM report in the temporary directory, named in the message; event
 * lines reach the event consumer and nothing else does.
 */
class WorkerProcessFaultsTest {
  private static final Duration LONG = Duration.ofMinutes(2);

  /** Fake workers: the first argument says what to do. */
  public static final class FakeWorker {
    private FakeWorker() {}

    /** Entry point of the fake worker JVM. */
    public static void main(String[] args) throws Exception {
      switch (args[0]) {
        case "events" -> {
          System.out.println(WorkerProcess.PREFIX + "{\"event\":\"step\",\"step\":1}");
          System.out.println("plain output line");
          System.out.println(WorkerProcess.PREFIX + "{\"event\":\"done\",\"peak_bytes\":7}");
          System.out.flush();
        }
        case "exit" -> {
          System.err.println("about to die: last words");
          System.err.flush();
          Runtime.getRuntime().halt(3);
        }
        case "kill" -> {
          System.err.println("killing myself with SIGKILL");
          System.err.flush();
          new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid()))
              .inheritIO().start().waitFor();
          Thread.sleep(60_000);
        }
        case "hang" -> Thread.sleep(Long.MAX_VALUE);
        case "segv" -> {
          // a native crash, as a TensorFlow kernel's after a failed allocation: the JVM writes
          // its hs_err report and dies with SIGABRT
          System.err.println("about to write through a null pointer");
          System.err.flush();
          java.lang.reflect.Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
          f.setAccessible(true);
          ((sun.misc.Unsafe) f.get(null)).putAddress(0L, 42L);
          Thread.sleep(60_000);
        }
        case "oom" -> {
          System.err.println("2026-11-24 W bfc_allocator.cc:291] Allocator (mklcpu) ran out of "
              + "memory trying to allocate 6.1MiB (rounded to 6422528)requested by op ReluGrad");
          System.err.flush();
          Thread.sleep(Long.MAX_VALUE); // TensorFlow would now retry for ~10 s
        }
        case "oom-dump" -> {
          // TensorFlow's OOM line and the allocator's dump after it (a recorded one)
          try (var in = FakeWorker.class.getResourceAsStream("bfc-dump-gpt2-3mib.txt")) {
            System.err.print(new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8));
          }
          System.err.flush();
          Thread.sleep(Long.MAX_VALUE); // TensorFlow would now retry for ~10 s
        }
        case "oom-not-a-failure" -> {
          System.err.println("W bfc_allocator.cc:291] Allocator (mklcpu) ran out of memory "
              + "trying to allocate 2.0GiB with freed_by_count=0. The caller indicates that this "
              + "is not a failure, but this may mean that there could be performance gains if "
              + "more memory were available.");
          System.err.flush();
          System.out.println(WorkerProcess.PREFIX + "{\"event\":\"done\"}");
        }
        default -> throw new IllegalArgumentException(args[0]);
      }
    }
  }

  private static WorkerProcess.Outcome run(String what, Duration timeout, List<JsonNode> events,
      List<String> output) throws Exception {
    return WorkerProcess.run(FakeWorker.class.getName(), List.of(what), 64, timeout,
        events::add, output::add);
  }

  @Test
  void eventLinesReachTheEventConsumerAndOtherLinesTheOutputConsumer() throws Exception {
    List<JsonNode> events = Collections.synchronizedList(new ArrayList<>());
    List<String> output = Collections.synchronizedList(new ArrayList<>());
    WorkerProcess.Outcome o = run("events", LONG, events, output);
    assertThat(o).isEqualTo(new WorkerProcess.Outcome(false, true, 0, null));
    assertThat(events).hasSize(2);
    assertThat(events.get(0).get("step").asInt()).isEqualTo(1);
    assertThat(events.get(1).get("peak_bytes").asLong()).isEqualTo(7);
    assertThat(output).containsExactly("plain output line");
  }

  @Test
  void aHardExitIsAFailedRunWithTheWorkersLastLines() throws Exception {
    WorkerProcess.Outcome o = run("exit", LONG, new ArrayList<>(), new ArrayList<>());
    assertThat(o.oom()).isFalse();
    assertThat(o.finished()).isTrue();
    assertThat(o.exitCode()).isEqualTo(3);
    assertThat(o.message()).startsWith("worker exited with code 3; last output: ")
        .contains("about to die: last words").doesNotContain("signal");
  }

  @Test
  void aWorkerKilledByASignalIsReportedWithTheSignal() throws Exception {
    WorkerProcess.Outcome o = run("kill", LONG, new ArrayList<>(), new ArrayList<>());
    assertThat(o.oom()).isFalse();
    assertThat(o.finished()).isTrue();
    assertThat(o.exitCode()).isEqualTo(137);
    assertThat(o.message()).startsWith("worker exited with code 137 (killed by signal 9)")
        .contains("killing myself with SIGKILL");
  }

  @Test
  void aNativeCrashLeavesItsReportInTheTemporaryDirectoryNotTheWorkingDirectory()
      throws Exception {
    Path cwd = Path.of("").toAbsolutePath();
    Set<Path> before = hsErrFiles(cwd);
    WorkerProcess.Outcome o = run("segv", LONG, new ArrayList<>(), new ArrayList<>());
    assertThat(o.oom()).isFalse();
    assertThat(o.finished()).isTrue();
    assertThat(o.exitCode()).isEqualTo(134);
    assertThat(o.message()).startsWith("worker exited with code 134 (killed by signal 6)")
        .contains("about to write through a null pointer");
    Matcher m = Pattern.compile("; JVM crash report: (\\S+)$").matcher(o.message());
    assertThat(m.find()).as(o.message()).isTrue();
    Path report = Path.of(m.group(1));
    try {
      assertThat(report).isRegularFile()
          .hasParent(Path.of(System.getProperty("java.io.tmpdir")));
      assertThat(Files.readString(report)).contains("SIGSEGV");
      assertThat(hsErrFiles(cwd)).as("no crash report left in " + cwd).isEqualTo(before);
    } finally {
      Files.deleteIfExists(report);
    }
  }

  private static Set<Path> hsErrFiles(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(f -> f.getFileName().toString().startsWith("hs_err_pid"))
          .collect(Collectors.toSet());
    }
  }

  @Test
  void aHangingWorkerIsStoppedAtTheTimeout() throws Exception {
    List<JsonNode> events = new ArrayList<>();
    WorkerProcess.Outcome o = run("hang", Duration.ofSeconds(3), events, new ArrayList<>());
    assertThat(o).isEqualTo(new WorkerProcess.Outcome(false, false, -1,
        "worker timed out after 3 s"));
    assertThat(events).isEmpty();
  }

  @Test
  void theAllocatorsOomLineStopsTheWorkerAtOnce() throws Exception {
    // the worker would sleep forever: only the OOM line can end it before the timeout
    WorkerProcess.Outcome o = run("oom", LONG, new ArrayList<>(), new ArrayList<>());
    assertThat(o.oom()).isTrue();
    assertThat(o.finished()).as("stopped by the supervisor, not by the timeout").isTrue();
    assertThat(o.exitCode()).isEqualTo(-1);
    assertThat(o.message()).isEqualTo("ran out of memory trying to allocate 6.1MiB (rounded to "
        + "6422528)requested by op ReluGrad");
  }

  /**
   * With a file to keep the dump in, the worker is stopped after the allocator's dump, not at
   * the OOM line: the dump goes to the file, its summary ends the message.
   */
  @Test
  void theAllocatorsDumpIsKeptWhenAsked(@org.junit.jupiter.api.io.TempDir Path dir)
      throws Exception {
    Path file = dir.resolve("dump.txt");
    WorkerProcess.Outcome o = WorkerProcess.run(FakeWorker.class.getName(), List.of("oom-dump"),
        3, LONG, e -> { }, l -> { }, file, false);
    assertThat(o.oom()).isTrue();
    assertThat(o.finished()).as("stopped by the supervisor after the dump").isTrue();
    assertThat(o.message()).startsWith("ran out of memory trying to allocate 32.0KiB (rounded to "
        + "32768)requested by op gpt2/h1/mlp/c_proj/MatMul; allocator at the failure: regions "
        + "2, 1 of a 3 MiB limit; 3.0 MiB in ").endsWith("largest free chunk 31.5 KiB");
    List<String> kept = Files.readAllLines(file);
    assertThat(kept.get(0)).startsWith("== lms4j worker under 3 MiB: ran out of memory");
    assertThat(kept).anyMatch(l -> l.contains("Next region of size 1048576"));
    assertThat(BfcDump.isEnd(kept.get(kept.size() - 1))).isTrue();
  }

  @Test
  void anOomLineMarkedNotAFailureIsIgnored() throws Exception {
    List<JsonNode> events = new ArrayList<>();
    WorkerProcess.Outcome o = run("oom-not-a-failure", LONG, events, new ArrayList<>());
    assertThat(o).isEqualTo(new WorkerProcess.Outcome(false, true, 0, null));
    assertThat(events).hasSize(1);
  }
}
