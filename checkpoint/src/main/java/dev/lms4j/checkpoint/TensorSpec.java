package dev.lms4j.checkpoint;

import java.util.Arrays;
import java.util.Objects;

/**
 * What a checkpoint holds for one tensor: name, dtype, shape and size in bytes.
 *
 * <pre>{@code
 * TensorSpec s = new TensorSpec("w0", DType.FLOAT32, new long[] {32, 64}, 32 * 64 * 4);
 * }</pre>
 */
public final class TensorSpec {
  private final String name;
  private final DType dtype;
  private final long[] shape;
  private final long byteSize;

  /**
   * A spec.
   *
   * @throws IllegalArgumentException when {@code byteSize} does not match dtype and shape
   */
  public TensorSpec(String name, DType dtype, long[] shape, long byteSize) {
    this.name = Objects.requireNonNull(name, "name");
    this.dtype = Objects.requireNonNull(dtype, "dtype");
    this.shape = shape.clone();
    this.byteSize = byteSize;
    long expected = TensorView.byteSize(dtype, this.shape);
    if (expected != byteSize) {
      throw new IllegalArgumentException("tensor '" + name + "': " + byteSize + " bytes but "
          + dtype + Arrays.toString(shape) + " needs " + expected);
    }
  }

  /** The tensor's name. */
  public String name() {
    return name;
  }

  /** The element type. */
  public DType dtype() {
    return dtype;
  }

  /** The shape (a copy). */
  public long[] shape() {
    return shape.clone();
  }

  /** The size in bytes. */
  public long byteSize() {
    return byteSize;
  }

  /** Whether dtype and shape equal the other's (names may differ). */
  public boolean sameLayout(TensorSpec other) {
    return dtype == other.dtype && Arrays.equals(shape, other.shape);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TensorSpec s && name.equals(s.name) && dtype == s.dtype
        && Arrays.equals(shape, s.shape) && byteSize == s.byteSize;
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, dtype, Arrays.hashCode(shape), byteSize);
  }

  @Override
  public String toString() {
    return name + " " + dtype + Arrays.toString(shape);
  }
}
