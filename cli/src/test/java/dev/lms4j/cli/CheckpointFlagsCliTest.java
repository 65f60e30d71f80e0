package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.checkpoint.CheckpointInfo;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --checkpoint-every} and {@code --checkpoint-unit} reach the trainer's checkpoint
 * callback: an MLP on 64 synthetic samples at batch 32 trains 2 steps an epoch, 4 epochs (8
 * steps); every 3 batches saves at steps 3 and 6, every 2 epochs after epochs 2 and 4 (steps 4
 * and 8). The steps are read back from the files backend. In this JVM ({@code --in-worker}).
 */
class CheckpointFlagsCliTest {
  @TempDir Path dir;

  private static String[] args(Path ckpt, String every, String unit) {
    return new String[] {"train", "--model", "mlp", "--batch", "32", "-o", "layers=2", "-o",
        "width=64", "--synthetic-size", "64", "--epochs", "4", "--checkpoint-dir",
        ckpt.toString(), "--checkpoint-backend", "files", "--checkpoint-every", every,
        "--checkpoint-unit", unit, "--in-worker"};
  }

  @Test
  void checkpointsAreTakenEveryNBatchesOrEveryNEpochsAsAsked() throws Exception {
    Path batches = dir.resolve("batches");
    CliRun.Result r = CliRun.exec(args(batches, "3", "batches"));
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(steps(batches)).containsExactly(3L, 6L);

    Path epochs = dir.resolve("epochs");
    r = CliRun.exec(args(epochs, "2", "epochs"));
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(steps(epochs)).containsExactly(4L, 8L);
  }

  private static List<Long> steps(Path ckpt) throws Exception {
    try (CheckpointBackend b = CheckpointBackends.open("files", "dir=" + ckpt + ",keep=0")) {
      return b.list().stream().map(CheckpointInfo::step).sorted().toList();
    }
  }
}
