package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The native library's host buffers checked from outside the library: not its own counters
 * but the process's mappings ({@code /proc/PID/maps}) of a child JVM
 * ({@link NativeSwapMappingsChild}) in which {@code LMS4J_SWAP_MAPS=memfd} names every host
 * mapping {@code /memfd:lms4j-swap} (works on any Linux kernel; naming anonymous mappings would
 * need {@code CONFIG_ANON_VMA_NAME}, which this machine's kernel lacks).
 *
 * <p>The graph swaps one 4 MiB tensor a step. A freed mapping is kept in the library's cache
 * for the next swap-out of the same size and unmapped after 10 s unused, so the expectation is
 * exact: after every good step and right after the failed one (session open) the process holds
 * exactly one such mapping of 4 MiB (the cached one, reused step after step: a buffer the
 * failed step leaked would be a second mapping), and once training stops that mapping goes
 * within the idle timeout, leaving none.
 */
class NativeSwapMappingsTest {
  private static final long MIB = 1 << 20;

  @Test
  void hostMappingsAreReleasedAfterManyStepsAndAFailedStepAsTheProcessSeesThem(
      @TempDir Path dir) throws Exception {
    NativeSwapTest.requireLibrary();
    String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb = new ProcessBuilder(javaBin, "-cp", System.getProperty("java.class.path"),
        NativeSwapMappingsChild.class.getName(), dir.toString());
    pb.environment().put("LMS4J_SWAP_MAPS", "memfd");
    pb.environment().remove("LMS4J_SWAP_CACHE_MB"); // the default cache, which keeps mappings
    pb.redirectError(dir.resolve("stderr.txt").toFile());
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
    String err = java.nio.file.Files.readString(dir.resolve("stderr.txt"));
    assertThat(p.exitValue()).as(err).isZero();

    List<String[]> lines = new ArrayList<>();
    out.lines().filter(l -> l.startsWith("maps ")).forEach(l -> lines.add(l.split(" ")));
    assertThat(lines).as(out).isNotEmpty();
    // each failing step really failed, every good step summed the swapped-back tensor
    assertThat(out).doesNotContain("maps not-failed").doesNotContain("maps wrong-sum");

    String[] before = find(lines, "before");
    assertThat(count(before)).as("lms4j mappings before any swap").isZero();
    int steps = 0;
    for (String[] l : lines) {
      if (l[1].equals("step")) {
        steps++;
        assertThat(count(l)).as("mappings after " + l[2]).isEqualTo(1);
        assertThat(bytes(l)).as("mapped bytes after " + l[2]).isEqualTo(4 * MIB);
      }
    }
    assertThat(steps).isEqualTo(40); // 20 sync and 20 async steps
    for (String op : List.of(NativeSwap.SWAP_OUT, NativeSwap.SWAP_OUT_ASYNC)) {
      for (String phase : List.of("failed", "closed")) {
        String[] l = find(lines, phase + " " + op);
        assertThat(count(l)).as(phase + " " + op + ": mappings (the cached one only)")
            .isEqualTo(1);
        assertThat(bytes(l)).as(phase + " " + op).isEqualTo(4 * MIB);
        assertThat(Long.parseLong(l[l.length - 2])).as("library's live buffers").isZero();
      }
    }
    List<String[]> idle = lines.stream().filter(l -> l[1].equals("idle")).toList();
    // while cached the mapping stays (the measure sees it) ...
    assertThat(count(idle.get(0))).as("right after training, cached").isEqualTo(1);
    // ... and after the idle timeout nothing of the library is mapped any more
    String[] last = idle.get(idle.size() - 1);
    assertThat(count(last)).as("mappings %s ms after training stopped; child said:%n%s",
        last[2], out).isZero();
    assertThat(bytes(last)).isZero();
  }

  private static String[] find(List<String[]> lines, String label) {
    String[] want = label.split(" ");
    return lines.stream().filter(l -> l.length >= want.length + 4
        && java.util.Arrays.equals(l, 1, 1 + want.length, want, 0, want.length))
        .findFirst().orElseThrow(() -> new AssertionError("no line " + label));
  }

  // "maps LABEL... COUNT BYTES LIVE CACHED": the counts sit 4 and 3 from the end
  private static long count(String[] l) {
    return Long.parseLong(l[l.length - 4]);
  }

  private static long bytes(String[] l) {
    return Long.parseLong(l[l.length - 3]);
  }
}
