package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Kills a worker JVM that writes checkpoints with the {@code files} backend at random moments
 * and checks after every kill that each listed checkpoint is complete (loads, CRC32C verified,
 * content recomputed) and that the newest one is at least the last save the worker reported as
 * done. {@code LMS4J_SOAK_KILLS} (environment) raises the number of kills (soak.sh).
 */
class CrashSafetyTest {
  private static final Logger LOG = LoggerFactory.getLogger(CrashSafetyTest.class);
  private static final int MIB = 24;
  private static final int KEEP = 3;

  @TempDir Path dir;

  @Test
  void theNewestCompleteCheckpointSurvivesKillsAtRandomMoments() throws Exception {
    int kills = Integer.parseInt(System.getenv().getOrDefault("LMS4J_SOAK_KILLS", "20"));
    long seed = Long.parseLong(System.getenv().getOrDefault("LMS4J_SOAK_SEED",
        Long.toString(System.nanoTime())));
    LOG.info("fault test: {} kills, seed {} (LMS4J_SOAK_SEED to replay)", kills, seed);
    Random rnd = new Random(seed);
    Path root = dir.resolve("ckpt");
    long lastReported = -1;
    int interrupted = 0;
    long verifiedBytes = 0;
    for (int k = 0; k < kills; k++) {
      ProcessBuilder pb = new ProcessBuilder(
          Path.of(System.getProperty("java.home"), "bin", "java").toString(),
          "-Xmx256m", "-cp", System.getProperty("java.class.path"),
          CrashWorker.class.getName(), root.toString(), "" + MIB, "" + KEEP);
      pb.redirectError(ProcessBuilder.Redirect.DISCARD);
      Process p = pb.start();
      AtomicLong saved = new AtomicLong(-1);
      Object ready = new Object();
      boolean[] isReady = {false};
      Thread reader = new Thread(() -> {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
            StandardCharsets.UTF_8))) {
          for (String line; (line = r.readLine()) != null; ) {
            if (line.startsWith("saved ")) {
              saved.set(Long.parseLong(line.substring(6)));
            } else if (line.startsWith("ready")) {
              synchronized (ready) {
                isReady[0] = true;
                ready.notifyAll();
              }
            }
          }
        } catch (IOException e) {
          // the process was killed
        }
      });
      reader.start();
      synchronized (ready) {
        long until = System.currentTimeMillis() + 30_000;
        while (!isReady[0] && System.currentTimeMillis() < until) {
          ready.wait(100);
        }
      }
      assertThat(isReady[0]).as("worker started").isTrue();
      Thread.sleep(rnd.nextInt(900)); // a random moment: before, during or between saves
      p.destroyForcibly();
      assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
      reader.join(10_000);
      if (saved.get() >= 0) {
        lastReported = Math.max(lastReported, saved.get());
      }
      if (hasLeftovers(root)) {
        interrupted++;
      }
      verifiedBytes += verify(root, lastReported);
    }
    LOG.info("fault test: {} kills, {} of them inside a write, last step {}, {} MiB verified",
        kills, interrupted, lastReported, verifiedBytes >> 20);
    assertThat(lastReported).as("the worker saved checkpoints").isPositive();
    assertThat(interrupted).as("some kills hit a write in progress").isPositive();
  }

  private static boolean hasLeftovers(Path root) throws IOException {
    if (!Files.isDirectory(root)) {
      return false;
    }
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(root, ".*")) {
      return ds.iterator().hasNext();
    }
  }

  /** Every listed checkpoint loads with the right content; returns the bytes verified. */
  private static long verify(Path root, long lastReported) throws IOException {
    if (!Files.isDirectory(root)) {
      assertThat(lastReported).as("nothing saved, nothing on disk").isEqualTo(-1);
      return 0;
    }
    List<Path> dirs = CheckpointDirs.complete(root); // before the backend cleans up
    long bytes = 0;
    try (CheckpointBackend b = CheckpointBackends.open("files", "dir=" + root + ",keep=0")) {
      List<CheckpointInfo> all = b.list();
      assertThat(all).as("every ckpt-* directory is complete").hasSameSizeAs(dirs);
      assertThat(all.size()).isLessThanOrEqualTo(KEEP + 1);
      if (lastReported >= 0) {
        assertThat(all).isNotEmpty();
        assertThat(all.get(all.size() - 1).step()).isGreaterThanOrEqualTo(lastReported);
      }
      for (CheckpointInfo c : all) {
        List<ByteBuffer> buffers = new ArrayList<>();
        List<TensorView> targets = new ArrayList<>();
        for (TensorSpec s : c.tensors()) {
          ByteBuffer buf = ByteBuffer.allocateDirect((int) s.byteSize())
              .order(ByteOrder.nativeOrder());
          buffers.add(buf);
          targets.add(TensorView.of(s.name(), s.dtype(), s.shape(), buf));
        }
        assertThat(targets).hasSize(5);
        b.load(c, targets); // sizes and CRC32C verified
        for (int i = 0; i < buffers.size(); i++) {
          LongBuffer lb = buffers.get(i).clear().asLongBuffer();
          for (int w = 0; w < lb.capacity(); w += 997) {
            assertThat(lb.get(w)).as("step %d tensor %d word %d", c.step(), i, w)
                .isEqualTo(CrashWorker.word(c.step(), i, w));
          }
          bytes += buffers.get(i).capacity();
        }
      }
    }
    return bytes;
  }
}
