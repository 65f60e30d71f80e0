package dev.lms4j.distributed;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The supervisor of a worker group, with stand-in workers that need no TensorFlow. */
class WorkerGroupTest {

  /**
   * A stand-in worker. {@code die FILE}: writes FILE, then ends as a killed process does (exit
   * 137). {@code follow FILE}: waits for FILE, then fails as a worker whose peer died (exit 1).
   */
  public static final class StandIn {
    public static void main(String[] args) throws Exception {
      Path marker = Path.of(args[1]);
      if (args[0].equals("segv")) {
        // a native crash, as a kernel's segfault after an out-of-memory error
        java.lang.reflect.Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        f.setAccessible(true);
        ((sun.misc.Unsafe) f.get(null)).putAddress(0L, 42L);
      }
      if (args[0].equals("die")) {
        Thread.sleep(300);
        Files.writeString(marker, "x");
        Runtime.getRuntime().halt(137);
      }
      while (!Files.exists(marker)) {
        Thread.sleep(1);
      }
      System.err.println("lms4j: task 0: training stopped: Connection reset by peer");
      System.exit(1);
    }
  }

  /**
   * When a worker is killed, its peer fails a moment later; both are found dead together, and
   * the message must name the killed one, not the peer that only noticed it.
   */
  @Test
  @Timeout(value = 2, unit = TimeUnit.MINUTES)
  void theKilledWorkerIsNamedNotThePeerThatNoticedIt(@TempDir Path dir) throws Exception {
    for (int round = 0; round < 3; round++) {
      Path marker = dir.resolve("dead" + round);
      WorkerGroup.Outcome o = WorkerGroup.run(StandIn.class.getName(),
          List.of(List.of("follow", marker.toString()), List.of("die", marker.toString())),
          64, Duration.ofMinutes(1), line -> { }, (t, e) -> { });
      assertThat(o.ok()).isFalse();
      assertThat(o.failedTask()).as(o.message()).isEqualTo(1);
      assertThat(o.message()).startsWith("worker 1 was killed (signal 9)")
          .endsWith("stopped the other 1 worker");
    }
  }

  /**
   * A worker that crashes in native code leaves its JVM crash report in the temporary directory
   * (not the working directory), and the job's message names the file.
   */
  @Test
  @Timeout(value = 2, unit = TimeUnit.MINUTES)
  void aNativeCrashIsNamedWithItsCrashReport(@TempDir Path dir) throws Exception {
    WorkerGroup.Outcome o = WorkerGroup.run(StandIn.class.getName(),
        List.of(List.of("follow", dir.resolve("never").toString()),
            List.of("segv", dir.resolve("unused").toString())),
        64, Duration.ofMinutes(1), line -> { }, (t, e) -> { });
    assertThat(o.ok()).isFalse();
    assertThat(o.failedTask()).as(o.message()).isEqualTo(1);
    assertThat(o.exitCode()).isEqualTo(134);
    Matcher m = Pattern.compile("; JVM crash report: (\\S+); stopped the other 1 worker$")
        .matcher(o.message());
    assertThat(m.find()).as(o.message()).isTrue();
    Path report = Path.of(m.group(1));
    try {
      assertThat(report).isRegularFile()
          .hasParent(Path.of(System.getProperty("java.io.tmpdir")));
      assertThat(Files.readString(report)).contains("SIGSEGV");
    } finally {
      Files.deleteIfExists(report);
    }
  }

  /** A worker that fails on its own (no peer died) is named with its last lms4j line. */
  @Test
  @Timeout(value = 2, unit = TimeUnit.MINUTES)
  void aPlainFailureIsNamedWithItsMessage(@TempDir Path dir) throws Exception {
    Path marker = dir.resolve("there");
    Files.writeString(marker, "x");
    WorkerGroup.Outcome o = WorkerGroup.run(StandIn.class.getName(),
        List.of(List.of("follow", marker.toString()), List.of("follow", dir.resolve("never")
            .toString())), 64, Duration.ofMinutes(1), line -> { }, (t, e) -> { });
    assertThat(o.ok()).isFalse();
    assertThat(o.failedTask()).isEqualTo(0);
    assertThat(o.exitCode()).isEqualTo(1);
    assertThat(o.message()).contains("worker 0 exited with code 1: task 0: training stopped");
  }
}
