package dev.lms4j.core.graph;

import java.util.Arrays;

/**
 * One op output: its dtype, static shape and size.
 *
 * @param dtype      dtype name as TensorFlow spells it ({@code float32}, {@code int32}, ...)
 * @param shape      static shape (no unknown dims: the adapter resolves the batch dim)
 * @param bytes      size in bytes of the device buffer
 * @param persistent true for variables and ref-typed outputs: they live across steps and are
 *                   never swapped or recomputed
 */
public record Tensor(String dtype, long[] shape, long bytes, boolean persistent) {
  public Tensor {
    shape = shape.clone();
    if (bytes < 0) {
      throw new IllegalArgumentException("negative tensor size");
    }
  }

  /** A transient tensor of the given size and rank-1 shape (for synthetic graphs and tests). */
  public static Tensor ofBytes(long bytes) {
    return new Tensor("float32", new long[] {Math.max(1, bytes / 4)}, bytes, false);
  }

  /** A transient float32 tensor of the given shape, 4 bytes per element (for tests). */
  public static Tensor float32(long... shape) {
    long bytes = 4;
    for (long d : shape) {
      bytes *= d;
    }
    return new Tensor("float32", shape, bytes, false);
  }

  /** A persistent tensor (a variable) of the given size. */
  public static Tensor persistent(long bytes) {
    return new Tensor("float32", new long[] {Math.max(1, bytes / 4)}, bytes, true);
  }

  /** The rank. */
  public int rank() {
    return shape.length;
  }

  @Override
  public long[] shape() {
    return shape.clone();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Tensor t && t.bytes == bytes && t.persistent == persistent
        && t.dtype.equals(dtype) && Arrays.equals(t.shape, shape);
  }

  @Override
  public int hashCode() {
    return Long.hashCode(bytes) * 31 + Arrays.hashCode(shape);
  }

  @Override
  public String toString() {
    return dtype + Arrays.toString(shape) + (persistent ? " persistent" : "") + " " + bytes + "B";
  }
}
