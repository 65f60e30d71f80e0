package dev.lms4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import org.junit.jupiter.api.Test;
import org.tensorflow.ndarray.Shape;

/** The real Fashion-MNIST files; skipped when Debian's dataset-fashion-mnist is not installed. */
class FashionMnistDataTest {

  @Test
  void realFilesHaveTheDocumentedSizesAndBalancedClasses() throws IOException {
    assumeTrue(FashionMnist.available(FashionMnist.DEFAULT_DIR),
        "Fashion-MNIST is not installed in " + FashionMnist.DEFAULT_DIR);
    Dataset train = FashionMnist.train(FashionMnist.DEFAULT_DIR);
    Dataset test = FashionMnist.test(FashionMnist.DEFAULT_DIR);
    assertThat(train.size()).isEqualTo(60_000);
    assertThat(test.size()).isEqualTo(10_000);
    assertThat(train.sampleShapes()).containsExactly(Shape.of(28, 28, 1), Shape.of(10));

    int[] counts = new int[10];
    float[] label = new float[10];
    for (int i = 0; i < test.size(); i++) {
      test.read(1, i, label, 0);
      for (int k = 0; k < 10; k++) {
        counts[k] += label[k] == 1f ? 1 : 0;
      }
    }
    assertThat(counts).containsOnly(1000);

    float[] image = new float[784];
    float min = 1;
    float max = 0;
    for (int i = 0; i < 100; i++) {
      train.read(0, i, image, 0);
      for (float v : image) {
        min = Math.min(min, v);
        max = Math.max(max, v);
      }
    }
    assertThat(min).isEqualTo(0f);
    assertThat(max).isEqualTo(1f);
  }
}
