package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Loading the native swap library leaves no copy of it in the temp directory. */
class NativeSwapTempFileTest {
  @TempDir Path tmp;

  @Test
  void aJvmThatLoadedTheLibraryLeavesNoCopyBehind() throws Exception {
    Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java")
        .toString(), "-Djava.io.tmpdir=" + tmp, "-cp", System.getProperty("java.class.path"),
        NativeSwap.class.getName()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
    assertThat(out).contains("native swap library: loaded");
    try (Stream<Path> left = Files.list(tmp)) {
      assertThat(left.map(f -> f.getFileName().toString()))
          .noneMatch(n -> n.startsWith("liblms4jswap"));
    }
  }
}
