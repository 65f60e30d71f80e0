package dev.lms4j.tf.run;

import dev.lms4j.tf.Manifest;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TFloat64;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;

/**
 * Makes a feed's synthetic tensor for a step, seeded by (seed, step, feed index) so two runs see
 * the same data. The caller closes the tensor. An integer feed with fill {@code ids} holds ids
 * drawn uniformly from {@code [0, max)} (exact: a double holds every id below 2^53); other
 * fills of an integer feed give {@code round(10 x value)}.
 */
public final class SyntheticFeeds {
  private SyntheticFeeds() {}

  /**
   * Feeds every feed of {@code m} to {@code runner} for {@code step} ({@link #make}).
   *
   * @return the tensors fed, for the caller to close once the step has run
   */
  public static List<Tensor> feed(Session.Runner runner, Manifest m, long seed, int step) {
    List<Tensor> fed = new ArrayList<>();
    for (int i = 0; i < m.feeds().size(); i++) {
      Tensor t = make(m.feeds().get(i), i, seed, step);
      fed.add(t);
      runner.feed(m.feeds().get(i).name(), t);
    }
    return fed;
  }

  /** The tensor for feed number {@code index} at {@code step}. */
  public static Tensor make(Manifest.Feed f, int index, long seed, int step) {
    SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + step * 7919L + index);
    long n = f.elements();
    if (n > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("feed " + f.name() + " is too large to synthesise");
    }
    double[] v = new double[(int) n];
    long last = f.shape().length == 0 ? 1 : f.shape()[f.shape().length - 1];
    switch (f.fill()) {
      case "normal" -> {
        for (int i = 0; i < v.length; i++) {
          v[i] = gaussian(rnd);
        }
      }
      case "uniform" -> {
        for (int i = 0; i < v.length; i++) {
          v[i] = rnd.nextDouble();
        }
      }
      case "onehot" -> {
        for (int row = 0; row < n / Math.max(1, last); row++) {
          v[(int) (row * last + rnd.nextLong(Math.max(1, last)))] = 1;
        }
      }
      case "ids" -> {
        for (int i = 0; i < v.length; i++) {
          v[i] = rnd.nextLong(f.max());
        }
      }
      default -> { }
    }
    Shape shape = Shape.of(f.shape());
    boolean ids = f.fill().equals("ids");
    return switch (f.dtype()) {
      case "float32" -> {
        float[] a = new float[v.length];
        for (int i = 0; i < a.length; i++) {
          a[i] = (float) v[i];
        }
        yield TFloat32.tensorOf(shape, DataBuffers.of(a, true, false));
      }
      case "float64" -> TFloat64.tensorOf(shape, DataBuffers.of(v, true, false));
      case "int32" -> {
        int[] a = new int[v.length];
        for (int i = 0; i < a.length; i++) {
          a[i] = ids ? (int) v[i] : (int) Math.round(v[i] * 10);
        }
        yield TInt32.tensorOf(shape, DataBuffers.of(a, true, false));
      }
      case "int64" -> {
        long[] a = new long[v.length];
        for (int i = 0; i < a.length; i++) {
          a[i] = ids ? (long) v[i] : Math.round(v[i] * 10);
        }
        yield TInt64.tensorOf(shape, DataBuffers.of(a, true, false));
      }
      default -> throw new IllegalArgumentException("unsupported feed dtype " + f.dtype());
    };
  }

  private static double gaussian(SplittableRandom r) {
    double u1 = 1.0 - r.nextDouble();
    double u2 = r.nextDouble();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }
}
