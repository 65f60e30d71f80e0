package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.FashionMnist;
import dev.lms4j.train.models.ModelZoo;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The zoo's {@code lenet} learns the real Fashion-MNIST: a short run (200 steps of 100 images, a
 * third of an epoch, about 10 s here) on the first 20,000 training images, evaluated on the
 * whole test split. Skipped when the data is not installed.
 */
class LeNetFashionMnistTest {

  @Test
  void aShortRunReachesAReasonableTestAccuracy() throws IOException {
    assumeTrue(FashionMnist.available(FashionMnist.DEFAULT_DIR),
        "Fashion-MNIST is not installed in " + FashionMnist.DEFAULT_DIR);
    Dataset train = FashionMnist.train(FashionMnist.DEFAULT_DIR).slice(0, 20_000);
    Dataset test = FashionMnist.test(FashionMnist.DEFAULT_DIR);
    TrainingGraph lenet = ModelZoo.getOrThrow("lenet").build(100, Map.of());
    try (Trainer trainer = new Trainer(lenet)) {
      Logs before = trainer.evaluate(test);
      List<Logs> history = trainer.fit(train, 1);
      Logs after = trainer.evaluate(test);

      // chance is 0.10; 200 steps of SGD with momentum measured 0.8x here (full run: 0.9x)
      assertThat(before.metric("accuracy")).isLessThan(0.3);
      assertThat(history.get(0).samples()).isEqualTo(20_000);
      assertThat(after.samples()).isEqualTo(10_000);
      assertThat(after.metric("accuracy")).isGreaterThan(0.75);
      assertThat(after.loss()).isLessThan(0.7).isLessThan(before.loss());
    }
  }
}
