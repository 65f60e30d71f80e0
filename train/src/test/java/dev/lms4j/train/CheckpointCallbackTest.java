package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.models.ModelZoo;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointCallbackTest {
  @TempDir Path dir;

  private final TrainingGraph tg = ModelZoo.getOrThrow("lenet").build(50,
      Map.of("width", "8", "dense", "64"));
  private final Dataset data = SyntheticDataset.forManifest(tg.manifest(), 400, 7);

  private static double[] losses(List<Logs> logs) {
    return logs.stream().mapToDouble(Logs::loss).toArray();
  }

  /**
   * A run checkpointed after each epoch, stopped after 2 of 4 epochs and resumed from the newest
   * checkpoint (weights and momentum), reaches the uninterrupted run's epoch losses exactly.
   */
  @Test
  void aResumedRunContinuesWithTheSameLosses() throws Exception {
    double[] straight;
    try (Trainer t = new Trainer(tg)) {
      straight = losses(t.fit(data, 4));
    }
    for (String backend : List.of("files", "tf")) {
      Path d = dir.resolve(backend);
      double[] first;
      try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + d);
          CheckpointCallback ckpt = CheckpointCallback.builder(b).everyEpochs(1).build();
          Trainer t = new Trainer(tg)) {
        first = losses(t.fit(data, 2, ckpt));
        assertThat(b.list()).hasSize(2);
        assertThat(ckpt.variables()).anyMatch(v -> v.startsWith("train/"));
      }
      double[] rest;
      try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + d);
          CheckpointCallback ckpt = CheckpointCallback.builder(b).everyEpochs(1).resume(true)
              .build();
          Trainer t = new Trainer(tg)) {
        assertThat(ckpt.latestEpoch()).isEqualTo(2);
        rest = losses(t.fit(data, 4 - ckpt.latestEpoch(), ckpt));
        assertThat(ckpt.resumedFrom()).isPresent();
        assertThat(t.epochsCompleted()).isEqualTo(4);
      }
      assertThat(new double[] {first[0], first[1], rest[0], rest[1]}).as(backend)
          .containsExactly(straight);
    }
  }

  @Test
  void everyNBatchesAndAsynchronousSavesProduceCheckpoints() throws Exception {
    // 400 samples / batch 50 = 8 steps per epoch; 2 epochs, every 3 steps: steps 3, 6, 9, 12, 15
    try (CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir + ",keep=10");
        CheckpointCallback ckpt = CheckpointCallback.builder(b).everyBatches(3).async(true)
            .optimizerState(false).build();
        Trainer t = new Trainer(tg)) {
      t.fit(data, 2, ckpt);
      assertThat(b.list()).extracting(c -> c.step()).containsExactly(3L, 6L, 9L, 12L, 15L);
      assertThat(ckpt.variables()).noneMatch(v -> v.startsWith("train/"));
      assertThat(b.latest().orElseThrow().tensors()).hasSize(ckpt.variables().size());
    }
  }
}
