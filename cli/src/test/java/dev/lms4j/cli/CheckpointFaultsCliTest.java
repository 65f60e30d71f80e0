package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.checkpoint.CheckpointLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code lms4j train} with checkpoints under faults: a second writer on one checkpoint directory
 * is refused (exit 2), a full disk while checkpointing ends with one line and the requested
 * report (exit 1) with the previous checkpoint intact, and resuming a finished run trains
 * nothing. The trainer runs in this JVM ({@code --in-worker}) where no budget is needed.
 */
class CheckpointFaultsCliTest {
  @TempDir Path dir;

  private static final String[] MLP = {"--model", "mlp", "--batch", "32", "-o", "layers=2",
      "-o", "width=256", "--synthetic-size", "64"};

  private static String[] args(String... more) {
    String[] a = new String[MLP.length + more.length + 1];
    a[0] = "train";
    System.arraycopy(MLP, 0, a, 1, MLP.length);
    System.arraycopy(more, 0, a, 1 + MLP.length, more.length);
    return a;
  }

  @Test
  void aSecondWriterIsRefused() throws Exception {
    Path ckpt = dir.resolve("ckpt");
    Path report = dir.resolve("r.json");
    try (CheckpointLock first = CheckpointLock.acquire(ckpt)) {
      CliRun.Result r = CliRun.exec(args("--epochs", "1", "--checkpoint-dir", ckpt.toString(),
          "--report", report.toString()));
      assertThat(r.code()).as(r.err()).isEqualTo(2);
      assertThat(r.err().lines().toList()).hasSize(1);
      assertThat(r.err()).contains("another training is writing checkpoints to " + ckpt);
    }
    assertThat(report).doesNotExist();
    try (var s = Files.list(ckpt)) {
      assertThat(s.map(p -> p.getFileName().toString())).containsExactly(CheckpointLock.FILE);
    }
  }

  @Test
  void resumingAFinishedRunTrainsNothing() throws Exception {
    Path ckpt = dir.resolve("ckpt");
    CliRun.Result first = CliRun.exec(args("--epochs", "2", "--checkpoint-dir", ckpt.toString(),
        "--checkpoint-unit", "batches", "--in-worker"));
    assertThat(first.code()).as(first.err()).isZero();
    CliRun.Result again = CliRun.exec(args("--epochs", "2", "--checkpoint-dir",
        ckpt.toString(), "--checkpoint-unit", "batches", "--resume", "--in-worker"));
    assertThat(again.code()).as(again.err()).isZero();
    assertThat(again.out()).contains("Already trained 2 epochs").doesNotContain("epoch 3");
  }

  @Test
  void aFullDiskEndsWithOneLineAndTheReport() throws Exception {
    // a 3 MiB file system: a checkpoint holds 2 x 1.03 MiB (weights and momentum), so a few
    // fit and a later one, written before older ones are pruned, does not
    Path small = Files.createDirectories(dir.resolve("small"));
    Process m = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs",
        small.toString()).redirectErrorStream(true).start();
    boolean mounted = m.waitFor(20, TimeUnit.SECONDS) && m.exitValue() == 0;
    Assumptions.assumeTrue(mounted, "cannot mount a small tmpfs here (needs root)");
    try {
      Path ckpt = small.resolve("ckpt");
      Path report = dir.resolve("r.json");
      CliRun.Result r = CliRun.exec(args("--epochs", "3", "--checkpoint-dir", ckpt.toString(),
          "--report", report.toString(), "--in-worker"));
      assertThat(r.code()).as(r.err()).isEqualTo(1);
      List<String> lines = r.err().lines().filter(l -> !l.isBlank()).toList();
      assertThat(lines).hasSize(1);
      assertThat(lines.get(0)).startsWith("lms4j: checkpoint at step")
          .contains("No space left on device").doesNotContain("Exception");
      JsonNode rep = new ObjectMapper().readTree(report.toFile());
      assertThat(rep.get("error").asText()).contains("No space left on device");
      // the checkpoints taken before the disk filled are intact and listed
      long failedAt = Long.parseLong(lines.get(0).replaceAll("^lms4j: checkpoint at step (\\d+).*",
          "$1"));
      try (CheckpointBackend b = CheckpointBackends.open("files", "dir=" + ckpt)) {
        assertThat(b.list()).isNotEmpty().allMatch(c -> c.step() < failedAt);
      }
    } finally {
      new ProcessBuilder("umount", small.toString()).start().waitFor(20, TimeUnit.SECONDS);
    }
  }
}
