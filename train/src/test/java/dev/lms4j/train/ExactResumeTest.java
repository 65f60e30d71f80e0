package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.models.ModelZoo;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Resuming from batch checkpoints continues exactly where the checkpoint was taken: data
 * position, step counter and optimizer state. A run checkpointed every 2 steps is stopped at a
 * random step, resumed from the newest checkpoint, and every step's loss (and every epoch's mean)
 * equals the uninterrupted run's bit for bit; resuming the finished run finds nothing to do.
 *
 * <p>The stop is in-process: a callback placed after the checkpoint callback throws at step k and
 * the trainer is closed, losing everything after the last checkpoint, as a {@code kill -9}
 * between two checkpoints does. What a kill adds, a checkpoint half written when the process
 * died, is skipped by the backends ({@code CrashSafetyTest} kills writing worker JVMs); so from
 * the resume's side the two are the same.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ExactResumeTest {
  private static final int EPOCHS = 3;
  private static final int EVERY = 2;
  @TempDir Path dir;

  // 400 samples / batch 50 = 8 steps per epoch, 24 in all
  private final TrainingGraph tg = ModelZoo.getOrThrow("lenet").build(50,
      Map.of("width", "8", "dense", "64"));
  private final Dataset data = SyntheticDataset.forManifest(tg.manifest(), 400, 7);
  private Map<String, Double> straightSteps;
  private List<Logs> straightEpochs;

  /** Each step's loss by "epoch/step". */
  private static final class Recorder implements Callback {
    final Map<String, Double> losses = new LinkedHashMap<>();
    private int epoch;

    @Override
    public void onEpochBegin(int e) {
      epoch = e;
    }

    @Override
    public void onBatchEnd(int batch, Logs logs) {
      losses.put(epoch + "/" + batch, logs.loss());
    }
  }

  /** Stops the run after its k-th step, as a kill would. */
  private static final class Stopper implements Callback {
    private final int k;
    private int steps;

    Stopper(int k) {
      this.k = k;
    }

    @Override
    public void onBatchEnd(int batch, Logs logs) {
      if (++steps == k) {
        throw new IllegalStateException("stopped at step " + k);
      }
    }
  }

  @BeforeAll
  void straightRun() {
    Recorder r = new Recorder();
    try (Trainer t = new Trainer(tg)) {
      straightEpochs = t.fit(data, EPOCHS, r);
    }
    straightSteps = r.losses;
    assertThat(straightSteps).hasSize(EPOCHS * 8);
  }

  @ParameterizedTest
  @ValueSource(strings = {"files", "tf"})
  void aRunStoppedAtARandomStepResumesWithTheSameLosses(String backend) throws Exception {
    long seed = System.nanoTime();
    int total = EPOCHS * 8;
    // a step strictly inside the run, after the first checkpoint
    int k = EVERY + new Random(seed).nextInt(total - EVERY - 1);
    String why = backend + ", stopped at step " + k + " (seed " + seed + ")";
    Path d = dir.resolve(backend);
    Recorder before = new Recorder();
    try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + d);
        CheckpointCallback ckpt = CheckpointCallback.builder(b).everyBatches(EVERY).build();
        Trainer t = new Trainer(tg)) {
      assertThatThrownBy(() -> t.fit(data, EPOCHS, ckpt, before, new Stopper(k)))
          .hasMessageContaining("stopped at step");
    }
    assertThat(before.losses).hasSize(k);
    before.losses.forEach((key, loss) -> assertThat(loss).as(why + ", " + key)
        .isEqualTo(straightSteps.get(key)));

    int resumedAt = k / EVERY * EVERY;   // the newest checkpoint's step
    Recorder after = new Recorder();
    try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + d);
        CheckpointCallback ckpt = CheckpointCallback.builder(b).everyBatches(EVERY).resume(true)
            .build();
        Trainer t = new Trainer(tg)) {
      assertThat(b.latest().orElseThrow().step()).as(why).isEqualTo(resumedAt);
      int done = ckpt.latestEpoch();
      assertThat(done).as(why).isEqualTo(resumedAt / 8);
      List<Logs> epochs = t.fit(data, EPOCHS - done, ckpt, after);
      assertThat(ckpt.resumedFrom()).isPresent();
      assertThat(t.epochsCompleted()).isEqualTo(EPOCHS);
      assertThat(b.latest().orElseThrow().step()).as(why).isEqualTo(total);
      // every epoch trained after the resume has the uninterrupted run's mean loss
      for (int i = 0; i < epochs.size(); i++) {
        assertThat(epochs.get(i).loss()).as(why + ", epoch " + (done + 1 + i))
            .isEqualTo(straightEpochs.get(done + i).loss());
      }
    }
    List<String> expectedKeys = straightSteps.keySet().stream().skip(resumedAt).toList();
    assertThat(after.losses.keySet()).as(why).containsExactlyElementsOf(expectedKeys);
    after.losses.forEach((key, loss) -> assertThat(Double.doubleToRawLongBits(loss))
        .as(why + ", " + key).isEqualTo(Double.doubleToRawLongBits(straightSteps.get(key))));

    // the run is finished: a resume finds every epoch done
    try (CheckpointBackend b = CheckpointBackends.open(backend, "dir=" + d);
        CheckpointCallback ckpt = CheckpointCallback.builder(b).everyBatches(EVERY).resume(true)
            .build()) {
      assertThat(ckpt.latestEpoch()).as(why).isEqualTo(EPOCHS);
    }
  }
}
