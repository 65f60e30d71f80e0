package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.checkpoint.CheckpointLock;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.models.ModelZoo;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Faults around checkpoints: a damaged newest checkpoint (a flipped byte, a truncated file) is
 * skipped with its reason and the previous one is used, and the epochs still add up; a
 * checkpoint of another model is refused naming the mismatch; a second writer is refused.
 */
class CheckpointFaultsTest {
  @TempDir Path dir;

  // 400 samples / batch 50 = 8 steps per epoch
  private final TrainingGraph tg = ModelZoo.getOrThrow("lenet").build(50,
      Map.of("width", "8", "dense", "64"));
  private final Dataset data = SyntheticDataset.forManifest(tg.manifest(), 400, 7);

  private static double[] losses(List<Logs> logs) {
    return logs.stream().mapToDouble(Logs::loss).toArray();
  }

  /** The largest file under {@code root} whose path contains {@code part}. */
  private static Path largestFile(Path root, String part) throws Exception {
    try (Stream<Path> w = Files.walk(root)) {
      return w.filter(Files::isRegularFile).filter(p -> p.toString().contains(part))
          .max(Comparator.comparingLong(p -> p.toFile().length())).orElseThrow();
    }
  }

  @ParameterizedTest(name = "{0}, {1}")
  @CsvSource({"files, flip", "files, truncate", "tf, flip", "tf, truncate"})
  void aDamagedNewestCheckpointFallsBackToThePreviousOne(String backend, String damage)
      throws Exception {
    double[] straight;
    try (Trainer t = new Trainer(tg)) {
      straight = losses(t.fit(data, 3));
    }
    Path d = dir.resolve(backend);
    try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + d + ",keep=5");
        CheckpointCallback ckpt = CheckpointCallback.builder(b).everyEpochs(1).build();
        Trainer t = new Trainer(tg)) {
      t.fit(data, 2, ckpt);
    }
    String newest;
    try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + d + ",keep=5")) {
      assertThat(b.list()).extracting(c -> c.step()).containsExactly(8L, 16L);
      newest = b.latest().orElseThrow().location();
    }
    // the newest checkpoint's largest file holds the tensors
    Path victim = largestFile(backend.equals("files") ? Path.of(newest) : d,
        backend.equals("files") ? "" : Path.of(newest).getFileName() + ".data");
    try (RandomAccessFile f = new RandomAccessFile(victim.toFile(), "rw")) {
      if (damage.equals("flip")) {
        long at = f.length() / 2;
        f.seek(at);
        int v = f.read();
        f.seek(at);
        f.write(v ^ 0x40);
      } else {
        f.setLength(f.length() / 2);
      }
    }
    try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + d + ",keep=5");
        CheckpointCallback ckpt = CheckpointCallback.builder(b).everyEpochs(1).resume(true)
            .build();
        Trainer t = new Trainer(tg)) {
      List<Logs> rest = t.fitUntil(data, 3, ckpt);
      assertThat(ckpt.resumedFrom().orElseThrow().step()).isEqualTo(8);
      assertThat(ckpt.skipped()).hasSize(1);
      assertThat(ckpt.skipped().get(0)).startsWith(newest).doesNotContain("\n");
      assertThat(t.epochsCompleted()).isEqualTo(3);
      // epochs 2 and 3 trained again from the checkpoint after epoch 1: the same losses
      assertThat(losses(rest)).containsExactly(straight[1], straight[2]);
    }
  }

  @Test
  void aCheckpointOfAnotherModelIsRefusedNamingTheMismatch() throws Exception {
    try (CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir);
        CheckpointCallback ckpt = CheckpointCallback.builder(b).everyEpochs(1).build();
        Trainer t = new Trainer(tg)) {
      t.fit(data, 1, ckpt);
    }
    TrainingGraph mlp = ModelZoo.getOrThrow("mlp").build(50,
        Map.of("layers", "2", "width", "32"));
    Dataset mlpData = SyntheticDataset.forManifest(mlp.manifest(), 100, 7);
    try (CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir);
        CheckpointCallback ckpt = CheckpointCallback.builder(b).everyEpochs(1).resume(true)
            .build();
        Trainer t = new Trainer(mlp)) {
      assertThatThrownBy(() -> t.fitUntil(mlpData, 2, ckpt))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("matches none of the model's")
          .hasMessageContaining("another model");
    }
  }

  @Test
  void aSecondWriterIsRefused() throws Exception {
    try (CheckpointLock first = CheckpointLock.acquire(dir)) {
      assertThatThrownBy(() -> CheckpointLock.acquire(dir))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("another training is writing checkpoints to " + dir)
          .hasMessageContaining("process " + ProcessHandle.current().pid());
      assertThatThrownBy(() -> CheckpointLock.checkFree(dir))
          .isInstanceOf(IllegalStateException.class);
    }
    // released: free again
    CheckpointLock.checkFree(dir);
    CheckpointLock.acquire(dir).close();
  }
}
