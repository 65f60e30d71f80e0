package dev.lms4j.train.data;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.types.TFloat32;

/**
 * Some samples of a {@link Dataset}, by index, and the feed tensors made from them.
 *
 * <pre>{@code
 * Batch b = Batch.of(dataset, new int[] {3, 1, 4});
 * try (TFloat32 labels = b.tensor(1, Shape.of(3, 10))) {
 *   ...
 * }
 * }</pre>
 *
 * A tensor is filled through one float array that the batches of one {@link Dataset#batches}
 * call share (it grows to the largest tensor made and is then reused), then copied into the
 * tensor's native memory in one bulk write. So batches are not thread-safe; use them one thread
 * at a time.
 */
public final class Batch {

  /** The reusable staging array shared by the batches of one iteration. */
  static final class Scratch {
    private float[] data = new float[0];

    float[] get(int n) {
      if (data.length < n) {
        data = new float[n];
      }
      return data;
    }
  }

  private final Dataset dataset;
  private final int[] indices;
  private final Scratch scratch;

  Batch(Dataset dataset, int[] indices, Scratch scratch) {
    this.dataset = dataset;
    this.indices = indices;
    this.scratch = scratch;
  }

  /**
   * A batch of the given samples.
   *
   * @param dataset the dataset
   * @param indices sample indices (copied), each in {@code [0, dataset.size())}; at least one
   * @return the batch
   * @throws IllegalArgumentException for an empty or out-of-range index list
   */
  public static Batch of(Dataset dataset, int[] indices) {
    Objects.requireNonNull(dataset, "dataset");
    if (indices.length == 0) {
      throw new IllegalArgumentException("a batch needs at least one sample");
    }
    for (int i : indices) {
      if (i < 0 || i >= dataset.size()) {
        throw new IllegalArgumentException("sample index " + i + " is outside [0, "
            + dataset.size() + ")");
      }
    }
    return new Batch(dataset, indices.clone(), new Scratch());
  }

  /**
   * The number of samples in the batch.
   *
   * @return the size, at least 1
   */
  public int size() {
    return indices.length;
  }

  /**
   * The dataset indices of the samples, in batch order.
   *
   * @return a copy of the indices
   */
  public int[] indices() {
    return indices.clone();
  }

  /**
   * Makes the feed tensor of one component. {@code shape[0]} is the batch dimension and may
   * exceed {@link #size()}: the rows past it repeat the batch's last sample (so a short final
   * batch fits a graph with a static batch size). The other dimensions may differ from the
   * component's sample shape as long as the element count is the same (a {@code [28, 28, 1]}
   * image feeds a {@code [batch, 784]} placeholder). The caller closes the tensor.
   *
   * @param component the component index
   * @param shape     the tensor's shape, {@code [rows, ...]}
   * @return a new float32 tensor
   * @throws IllegalArgumentException when the shape does not fit the component or the batch
   */
  public TFloat32 tensor(int component, Shape shape) {
    List<Shape> shapes = dataset.sampleShapes();
    if (component < 0 || component >= shapes.size()) {
      throw new IllegalArgumentException("component " + component + " does not exist (the "
          + "dataset has " + shapes.size() + ")");
    }
    if (shape.numDimensions() < 1 || shape.hasUnknownDimension()) {
      throw new IllegalArgumentException("tensor shape " + shape + " needs a known batch "
          + "dimension and known sizes");
    }
    long rows = shape.get(0);
    long perRow = rows == 0 ? 0 : shape.size() / rows;
    long sample = shapes.get(component).size();
    if (rows < indices.length || perRow != sample) {
      throw new IllegalArgumentException("cannot make a tensor of shape " + shape
          + " from a batch of " + indices.length + " samples of shape "
          + shapes.get(component) + " (" + sample + " elements each)");
    }
    if (shape.size() > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException("tensor shape " + shape + " is too large");
    }
    int each = (int) sample;
    int filled = indices.length * each;
    float[] buf = scratch.get(filled);
    for (int i = 0; i < indices.length; i++) {
      dataset.read(component, indices[i], buf, i * each);
    }
    TFloat32 t = TFloat32.tensorOf(shape);
    try {
      var dst = t.asRawTensor().data().asFloats();
      dst.write(buf, 0, filled);
      int last = (indices.length - 1) * each;
      for (long r = indices.length; r < rows; r++) {
        dst.offset(r * each).write(buf, last, each);
      }
    } catch (RuntimeException e) {
      t.close();
      throw e;
    }
    return t;
  }

  @Override
  public String toString() {
    return "Batch" + (indices.length <= 8 ? Arrays.toString(indices)
        : "[" + indices.length + " samples]");
  }
}
