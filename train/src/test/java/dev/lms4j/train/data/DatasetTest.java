package dev.lms4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.tf.Manifest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.types.TFloat32;

class DatasetTest {

  /** Sample i has features [i, i + 0.5] and label i % 3 one-hot over 3 classes. */
  static final Dataset COUNTING = new Dataset() {
    @Override
    public int size() {
      return 10;
    }

    @Override
    public List<Shape> sampleShapes() {
      return List.of(Shape.of(2), Shape.of(3));
    }

    @Override
    public void read(int component, int sample, float[] dst, int offset) {
      if (component == 0) {
        dst[offset] = sample;
        dst[offset + 1] = sample + 0.5f;
      } else {
        Arrays.fill(dst, offset, offset + 3, 0f);
        dst[offset + sample % 3] = 1f;
      }
    }
  };

  private static List<Integer> order(List<Batch> batches) {
    List<Integer> all = new ArrayList<>();
    batches.forEach(b -> Arrays.stream(b.indices()).forEach(all::add));
    return all;
  }

  @Test
  void batchesCoverEverySampleOnceWithAShortLastBatch() {
    List<Batch> batches = COUNTING.batches(4, false, 0);
    assertThat(batches).extracting(Batch::size).containsExactly(4, 4, 2);
    assertThat(order(batches)).containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
    assertThat(COUNTING.batches(10, false, 0)).hasSize(1);
    assertThat(COUNTING.batches(11, false, 0)).extracting(Batch::size).containsExactly(10);
    assertThatThrownBy(() -> COUNTING.batches(0, false, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batch size");
  }

  @Test
  void shufflingIsAPermutationFixedBySeed() {
    List<Integer> a = order(COUNTING.batches(3, true, 7));
    assertThat(a).containsExactlyInAnyOrder(0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
    assertThat(order(COUNTING.batches(3, true, 7))).isEqualTo(a);
    assertThat(order(COUNTING.batches(3, true, 8))).isNotEqualTo(a);
    assertThat(a).isNotEqualTo(List.of(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  }

  @Test
  void tensorsHoldTheSamplesInBatchOrderAndMayBeReshaped() {
    Batch b = Batch.of(COUNTING, new int[] {3, 1, 4});
    try (TFloat32 x = b.tensor(0, Shape.of(3, 2));
         TFloat32 flat = b.tensor(0, Shape.of(3, 1, 2));
         TFloat32 y = b.tensor(1, Shape.of(3, 3))) {
      assertThat(x.shape()).isEqualTo(Shape.of(3, 2));
      assertThat(values(x)).containsExactly(3f, 3.5f, 1f, 1.5f, 4f, 4.5f);
      assertThat(values(flat)).containsExactly(3f, 3.5f, 1f, 1.5f, 4f, 4.5f);
      assertThat(values(y)).containsExactly(1, 0, 0, 0, 1, 0, 0, 1, 0);
    }
  }

  @Test
  void shortBatchesArePaddedWithTheirLastSample() {
    List<Batch> batches = COUNTING.batches(4, false, 0);
    // the batches of one call share the staging buffer: make them one after another
    try (TFloat32 first = batches.get(0).tensor(0, Shape.of(4, 2));
         TFloat32 last = batches.get(2).tensor(0, Shape.of(4, 2))) {
      assertThat(values(first)).containsExactly(0f, 0.5f, 1f, 1.5f, 2f, 2.5f, 3f, 3.5f);
      assertThat(values(last)).containsExactly(8f, 8.5f, 9f, 9.5f, 9f, 9.5f, 9f, 9.5f);
    }
  }

  @Test
  void tensorShapesThatDoNotFitAreRejected() {
    Batch b = Batch.of(COUNTING, new int[] {0, 1});
    assertThatThrownBy(() -> b.tensor(0, Shape.of(2, 3)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("[2, 3]").hasMessageContaining("2 elements each");
    assertThatThrownBy(() -> b.tensor(0, Shape.of(1, 2)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batch of 2");
    assertThatThrownBy(() -> b.tensor(2, Shape.of(2, 2)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("component 2");
    assertThatThrownBy(() -> Batch.of(COUNTING, new int[] {10}))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("index 10");
    assertThatThrownBy(() -> Batch.of(COUNTING, new int[0]))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void slicesAreViews() {
    Dataset s = COUNTING.slice(2, 5);
    assertThat(s.size()).isEqualTo(3);
    float[] v = new float[2];
    s.read(0, 0, v, 0);
    assertThat(v).containsExactly(2f, 2.5f);
    assertThatThrownBy(() -> s.read(0, 3, v, 0)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> COUNTING.slice(4, 11))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("[4, 11)");
  }

  @Test
  void syntheticDataIsSeededOrderIndependentAndLearnable() {
    SyntheticDataset d = SyntheticDataset.of(200, 5, Shape.of(4, 3), 4);
    assertThat(d.sampleShapes()).containsExactly(Shape.of(4, 3), Shape.of(4));
    float[] a = new float[12];
    float[] b = new float[12];
    d.read(0, 17, a, 0);
    d.read(0, 3, b, 0);
    d.read(0, 17, b, 0);
    assertThat(b).isEqualTo(a);
    float[] other = new float[12];
    SyntheticDataset.of(200, 6, Shape.of(4, 3), 4).read(0, 17, other, 0);
    assertThat(other).isNotEqualTo(a);

    // labels are one-hot, every class occurs, and they are a function of the features
    int[] counts = new int[4];
    float[] y = new float[4];
    for (int i = 0; i < d.size(); i++) {
      d.read(1, i, y, 0);
      assertThat(IntStream.range(0, 4).mapToDouble(k -> y[k]).sum()).isEqualTo(1.0);
      for (int k = 0; k < 4; k++) {
        counts[k] += (int) y[k];
      }
    }
    assertThat(Arrays.stream(counts).min().orElseThrow()).isPositive();
  }

  @Test
  void syntheticDataForAManifestFollowsItsFeeds() {
    Manifest m = new Manifest(List.of(
        new Manifest.Feed("x", "float32", new long[] {8, 5}, "uniform"),
        new Manifest.Feed("mask", "float32", new long[] {8, 2}, "zeros"),
        new Manifest.Feed("labels", "float32", new long[] {8, 3}, "onehot")),
        "loss", "train_op", "init");
    SyntheticDataset d = SyntheticDataset.forManifest(m, 30, 1);
    assertThat(d.sampleShapes()).containsExactly(Shape.of(5), Shape.of(2), Shape.of(3));
    float[] x = new float[5];
    d.read(0, 4, x, 0);
    for (float v : x) {
      assertThat(v).isBetween(0f, 1f);
    }
    float[] mask = {9, 9};
    d.read(1, 4, mask, 0);
    assertThat(mask).containsExactly(0f, 0f);
    assertThatThrownBy(() -> SyntheticDataset.forManifest(new Manifest(List.of(
        new Manifest.Feed("ids", "int32", new long[] {8}, "uniform")), "loss", "t", null), 3, 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ids")
        .hasMessageContaining("float32");
    assertThatThrownBy(() -> SyntheticDataset.of(3, 1, Shape.of(2), 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("classes");
  }

  private static float[] values(TFloat32 t) {
    float[] out = new float[(int) t.size()];
    t.asRawTensor().data().asFloats().read(out);
    return out;
  }
}
