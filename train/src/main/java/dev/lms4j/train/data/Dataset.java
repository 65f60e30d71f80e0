package dev.lms4j.train.data;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.tensorflow.ndarray.Shape;

/**
 * A finite, indexable set of samples for training or evaluation. Every sample has the same
 * components (for supervised data: component 0 the features, component 1 the one-hot labels),
 * each a float array of a fixed per-sample shape.
 *
 * <pre>{@code
 * Dataset train = FashionMnist.train(FashionMnist.DEFAULT_DIR);
 * for (Batch b : train.batches(100, true, 42)) {
 *   try (TFloat32 x = b.tensor(0, Shape.of(100, 28, 28, 1))) {
 *     ...
 *   }
 * }
 * }</pre>
 *
 * Implementations only say how many samples there are, their shapes, and how to {@link #read} one
 * sample's component; batching, seeded shuffling and feed tensors come from the default methods.
 */
public interface Dataset {

  /**
   * The number of samples.
   *
   * @return the size, at least 0
   */
  int size();

  /**
   * The shape of one sample of each component, without the batch dimension: e.g.
   * {@code [[28, 28, 1], [10]]} for Fashion-MNIST.
   *
   * @return one shape per component, in component order
   */
  List<Shape> sampleShapes();

  /**
   * Writes one sample's component into {@code dst}: exactly {@code sampleShapes().get(component)
   * .size()} floats from {@code offset} on, every one of them (buffers are reused).
   *
   * @param component the component index
   * @param sample    the sample index, in {@code [0, size())}
   * @param dst       the destination
   * @param offset    where the sample starts in {@code dst}
   */
  void read(int component, int sample, float[] dst, int offset);

  /**
   * One epoch's batches: the samples in order, or in a random order fixed by {@code seed}. Every
   * sample is in exactly one batch; all batches hold {@code batchSize} samples except perhaps the
   * last one. Batches are light (index windows); their tensors are made on demand by
   * {@link Batch#tensor}, one batch at a time (the batches of one call share a buffer).
   *
   * @param batchSize samples per batch, at least 1
   * @param shuffle   whether to permute the samples
   * @param seed      the permutation's seed (same seed, same order)
   * @return the batches, in order
   * @throws IllegalArgumentException when {@code batchSize < 1}
   */
  default List<Batch> batches(int batchSize, boolean shuffle, long seed) {
    if (batchSize < 1) {
      throw new IllegalArgumentException("batch size must be >= 1, got " + batchSize);
    }
    int n = size();
    int[] order = new int[n];
    for (int i = 0; i < n; i++) {
      order[i] = i;
    }
    if (shuffle) {
      SplittableRandom random = new SplittableRandom(seed);
      for (int i = n - 1; i > 0; i--) {
        int j = random.nextInt(i + 1);
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
    }
    Batch.Scratch scratch = new Batch.Scratch();
    List<Batch> out = new ArrayList<>((n + batchSize - 1) / batchSize);
    for (int from = 0; from < n; from += batchSize) {
      int to = Math.min(n, from + batchSize);
      out.add(new Batch(this, java.util.Arrays.copyOfRange(order, from, to), scratch));
    }
    return out;
  }

  /**
   * A view of the samples {@code [from, to)} of this dataset (no copy).
   *
   * @param from first sample, inclusive
   * @param to   last sample, exclusive
   * @return the view
   * @throws IllegalArgumentException when the range is not inside {@code [0, size()]}
   */
  default Dataset slice(int from, int to) {
    if (from < 0 || to < from || to > size()) {
      throw new IllegalArgumentException("slice [" + from + ", " + to + ") is not inside [0, "
          + size() + ")");
    }
    Dataset whole = this;
    return new Dataset() {
      @Override
      public int size() {
        return to - from;
      }

      @Override
      public List<Shape> sampleShapes() {
        return whole.sampleShapes();
      }

      @Override
      public void read(int component, int sample, float[] dst, int offset) {
        if (sample < 0 || sample >= to - from) {
          throw new IndexOutOfBoundsException("sample " + sample + " of a slice of "
              + (to - from));
        }
        whole.read(component, from + sample, dst, offset);
      }

      @Override
      public String toString() {
        return whole + "[" + from + ":" + to + "]";
      }
    };
  }
}
