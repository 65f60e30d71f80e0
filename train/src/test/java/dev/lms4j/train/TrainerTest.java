package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.SwapRewriter;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.models.ModelZoo;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.proto.GraphDef;

class TrainerTest {

  private static final int BATCH = 8;
  private static final Map<String, String> MLP =
      Map.of("layers", "2", "width", "32", "input", "20", "classes", "4", "lr", "0.1");

  private static TrainingGraph mlp() {
    return ModelZoo.getOrThrow("mlp").build(BATCH, MLP);
  }

  /** 100 samples: 12 steps of 8 per epoch, 4 samples skipped. */
  private static Dataset data() {
    return SyntheticDataset.of(100, 3, Shape.of(20), 4);
  }

  /** Records every hook as a string. */
  static final class Recorder implements Callback {
    final List<String> calls = new ArrayList<>();
    final List<Logs> batchLogs = new ArrayList<>();

    @Override
    public GraphDef beforeSession(GraphDef graphDef, Manifest manifest) {
      calls.add("beforeSession");
      return graphDef;
    }

    @Override
    public void onSessionStart(Trainer trainer) {
      calls.add("sessionStart");
      assertThat(trainer.session()).isNotNull();
      assertThat(trainer.graph().operation("train_op")).isNotNull();
    }

    @Override
    public void onTrainBegin(FitInfo info) {
      calls.add("trainBegin " + info);
    }

    @Override
    public void onEpochBegin(int epoch) {
      calls.add("epochBegin " + epoch);
    }

    @Override
    public void onBatchBegin(int batch) {
      calls.add("b" + batch);
    }

    @Override
    public void onBatchEnd(int batch, Logs logs) {
      calls.add("e" + batch);
      batchLogs.add(logs);
    }

    @Override
    public void onEpochEnd(int epoch, Logs logs) {
      calls.add("epochEnd " + epoch);
    }

    @Override
    public void onTrainEnd(Logs logs) {
      calls.add("trainEnd");
    }

    @Override
    public void onTrainAborted(Throwable cause) {
      calls.add("aborted " + cause.getMessage());
    }
  }

  @Test
  void fitLearnsAndReportsLossAccuracyAndThroughput() {
    try (Trainer t = new Trainer(mlp())) {
      Logs before = t.evaluate(data());
      List<Logs> history = t.fit(data(), 4);
      Logs after = t.evaluate(data());

      assertThat(history).hasSize(4);
      assertThat(t.epochsCompleted()).isEqualTo(4);
      Logs last = history.get(3);
      assertThat(last.samples()).isEqualTo(96);
      assertThat(last.metrics()).containsOnlyKeys("accuracy");
      assertThat(last.samplesPerSecond()).isPositive();
      assertThat(history.get(3).loss()).isLessThan(history.get(0).loss());
      // 4 classes: chance is 0.25; the labels are a linear function of the features
      assertThat(after.metric("accuracy")).isGreaterThan(0.6)
          .isGreaterThan(before.metric("accuracy"));
      assertThat(after.loss()).isLessThan(before.loss());
      assertThat(after.samples()).isEqualTo(100);
      assertThat(after.summary()).matches("loss \\d+\\.\\d{4} accuracy \\d\\.\\d{4} \\d+ "
          + "samples/s");
      assertThatThrownBy(() -> after.metric("f1"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("accuracy");
    }
  }

  @Test
  void hooksRunInOrderAndTheSessionStartsOnce() {
    Recorder r = new Recorder();
    Dataset small = SyntheticDataset.of(20, 1, Shape.of(20), 4); // 2 steps per epoch
    try (Trainer t = new Trainer(mlp())) {
      assertThatThrownBy(t::session).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("first fit or evaluate");
      t.fit(small, 2, r);
      t.evaluate(small, r);
      t.fit(small, 1, r);
    }
    assertThat(r.calls).containsExactly(
        "beforeSession", "sessionStart", "trainBegin FitInfo[firstEpoch=1, lastEpoch=2, "
            + "stepsPerEpoch=2, batchSize=8]",
        "epochBegin 1", "b1", "e1", "b2", "e2", "epochEnd 1",
        "epochBegin 2", "b1", "e1", "b2", "e2", "epochEnd 2", "trainEnd",
        "trainBegin FitInfo[firstEpoch=3, lastEpoch=3, stepsPerEpoch=2, batchSize=8]",
        "epochBegin 3", "b1", "e1", "b2", "e2", "epochEnd 3", "trainEnd");
    assertThat(r.batchLogs).allSatisfy(l -> {
      assertThat(l.samples()).isEqualTo(BATCH);
      assertThat(l.metric("accuracy")).isBetween(0.0, 1.0);
      assertThat(l.metric("accuracy") * BATCH).isCloseTo(Math.rint(l.metric("accuracy")
          * BATCH), org.assertj.core.data.Offset.offset(1e-6));
    });
  }

  @Test
  void trainingIsDeterministic() {
    List<Double> a = losses(new Trainer(mlp()));
    List<Double> b = losses(new Trainer(mlp()));
    assertThat(b).isEqualTo(a);
    List<Double> other = losses(new Trainer(mlp(), Trainer.Config.defaults().withSeed(43)));
    assertThat(other).isNotEqualTo(a);
  }

  private static List<Double> losses(Trainer t) {
    List<Double> out = new ArrayList<>();
    try (t) {
      t.fit(data(), 2, new Callback() {
        @Override
        public void onBatchEnd(int batch, Logs logs) {
          out.add(logs.loss());
        }
      });
    }
    return out;
  }

  @Test
  void evaluationIsTheExactMeanOverAllSamplesDespiteAShortLastBatch() {
    Dataset ten = SyntheticDataset.of(10, 3, Shape.of(20), 4); // batches of 8 and 2
    try (Trainer t = new Trainer(mlp())) {
      t.fit(data(), 1);
      Logs all = t.evaluate(ten);
      // reference: each sample alone (a batch of 8 copies of it gives its own values)
      double loss = 0;
      double accuracy = 0;
      for (int i = 0; i < 10; i++) {
        Logs one = t.evaluate(ten.slice(i, i + 1));
        assertThat(one.metric("accuracy")).isIn(0.0, 1.0);
        loss += one.loss() / 10;
        accuracy += one.metric("accuracy") / 10;
      }
      assertThat(all.samples()).isEqualTo(10);
      assertThat(all.loss()).isCloseTo(loss, org.assertj.core.data.Offset.offset(1e-5));
      assertThat(all.metric("accuracy")).isCloseTo(accuracy,
          org.assertj.core.data.Offset.offset(1e-6));
    }
  }

  @Test
  void lmsRewritesTheGraphBeforeTheSessionAndKeepsTheLosses() {
    SwapParams p = SwapParams.builder().swapoutThreshold(1).swapinAhead(1).swapinGroupby(0)
        .build();
    LmsCallback lms = new LmsCallback(Lms.builder().params(p).build());
    assertThat(lms.result()).isEmpty();
    assertThatThrownBy(lms::resultOrThrow).isInstanceOf(IllegalStateException.class);
    List<Double> with = new ArrayList<>();
    try (Trainer t = new Trainer(mlp())) {
      assertThat(SwapRewriter.isRewritten(t.trainingGraph().graphDef())).isFalse();
      t.fit(data(), 2, lms, new Callback() {
        @Override
        public void onBatchEnd(int batch, Logs logs) {
          with.add(logs.loss());
        }
      });
      assertThat(lms.resultOrThrow().rewritten()).isTrue();
      assertThat(lms.resultOrThrow().plan().swapOuts()).isNotEmpty();
      assertThat(SwapRewriter.isRewritten(t.trainingGraph().graphDef())).isTrue();
      assertThat(t.trainingGraph().graphDef()).isSameAs(lms.resultOrThrow().graphDef());
      assertThat(t.graph().operation(lms.resultOrThrow().plan().swapOuts().get(0)
          .swapIns().get(0).name())).isNotNull();
    }
    // swapping through host memory never changes the math
    assertThat(with).isEqualTo(losses(new Trainer(mlp())));
  }

  @Test
  void lmsWithABudgetThatTheGraphFitsLeavesItAlone() {
    LmsCallback lms = LmsCallback.of(1L << 30);
    TrainingGraph tg = mlp();
    try (Trainer t = new Trainer(tg)) {
      t.fit(data(), 1, lms);
      assertThat(lms.resultOrThrow().rewritten()).isFalse();
      assertThat(t.trainingGraph()).isSameAs(tg);
      assertThat(SwapRewriter.isRewritten(t.trainingGraph().graphDef())).isFalse();
    }
    assertThatThrownBy(() -> LmsCallback.of(0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("budget");
  }

  @Test
  void anImpossibleBudgetNamesTheSmallestOne() {
    try (Trainer t = new Trainer(mlp())) {
      assertThatThrownBy(() -> t.fit(data(), 1, LmsCallback.of(1024)))
          .isInstanceOf(dev.lms4j.core.plan.PlanningException.class)
          .hasMessageContaining("smallest budget");
    }
  }

  @Test
  void aFailingCallbackAbortsTheFitAndEveryCallbackHearsOfIt() {
    Recorder r = new Recorder();
    Callback failing = new Callback() {
      @Override
      public void onBatchEnd(int batch, Logs logs) {
        if (batch == 2) {
          throw new IllegalStateException("boom");
        }
      }
    };
    try (Trainer t = new Trainer(mlp())) {
      assertThatThrownBy(() -> t.fit(data(), 3, r, failing))
          .isInstanceOf(IllegalStateException.class).hasMessage("boom");
      assertThat(t.epochsCompleted()).isZero();
    }
    assertThat(r.calls).endsWith("b2", "e2", "aborted boom").doesNotContain("trainEnd");
  }

  @Test
  void badInputIsRejectedClearly() {
    try (Trainer t = new Trainer(mlp())) {
      assertThatThrownBy(() -> t.fit(data(), 0))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("epochs");
      assertThatThrownBy(() -> t.fit(SyntheticDataset.of(7, 1, Shape.of(20), 4), 1))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("7 samples, fewer than one batch of 8");
      assertThatThrownBy(() -> t.fit(SyntheticDataset.of(50, 1, Shape.of(21), 4), 1))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("component 0").hasMessageContaining("[21]")
          .hasMessageContaining("'x'").hasMessageContaining("20 elements per sample");
      assertThatThrownBy(() -> t.evaluate(SyntheticDataset.of(50, 1, Shape.of(20), 5)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'labels'");
      assertThatThrownBy(() -> t.fit(data(), 1, new Callback() {
        @Override
        public GraphDef beforeSession(GraphDef graphDef, Manifest manifest) {
          return null;
        }
      })).isInstanceOf(IllegalStateException.class).hasMessageContaining("returned null");
    }
    assertThatThrownBy(() -> new Trainer(mlp(), Trainer.Config.defaults().withBatchSize(16)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("built for batch 8").hasMessageContaining("not 16");
    assertThat(new Trainer(mlp(), Trainer.Config.defaults().withBatchSize(8)).config()
        .batchSize()).isEqualTo(8);
    TrainingGraph tg = mlp();
    Manifest m = tg.manifest();
    TrainingGraph wrongLoss = new TrainingGraph(tg.graphDef(),
        new Manifest(m.feeds(), "nope:0", m.trainOp(), m.init(), m.metrics()));
    assertThatThrownBy(() -> new Trainer(wrongLoss))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no op 'nope'");
  }

  @Test
  void closeIsIdempotentAndEndsUse() {
    Trainer t = new Trainer(mlp());
    t.evaluate(data());
    t.close();
    t.close();
    assertThatThrownBy(() -> t.fit(data(), 1))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    assertThatThrownBy(t::session).isInstanceOf(IllegalStateException.class);
    AtomicInteger starts = new AtomicInteger();
    try (Trainer unused = new Trainer(mlp())) {
      starts.incrementAndGet(); // closing a trainer whose session never started is fine
    }
    assertThat(starts).hasValue(1);
  }
}
