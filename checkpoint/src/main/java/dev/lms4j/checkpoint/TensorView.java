package dev.lms4j.checkpoint;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;
import org.tensorflow.Tensor;

/**
 * A named tensor as a backend sees it: dtype, shape and a {@link ByteBuffer} over the tensor's
 * bytes (row-major, native byte order, TensorFlow's own layout).
 *
 * <p><b>Zero copy.</b> {@link #of(String, Tensor)} wraps the tensor's native memory itself: the
 * buffer is a direct {@code ByteBuffer} at the tensor's data address (found through the
 * tensor's raw {@code ByteDataBuffer}, wrapped by JavaCPP), so reading it reads the tensor and
 * writing it writes the tensor. No byte is copied when a view is made. A view over a variable
 * fetched from a {@code Session} aliases the variable's live memory in TF 2.18 (checked here:
 * an {@code AssignAdd} run after the fetch shows through the view), so it must be consumed
 * before the next training step runs; {@link AsyncCheckpointer} copies into a snapshot for that
 * reason.
 *
 * <p>A view is valid only while the tensor (or buffer) it wraps is open; it does not own it. A
 * {@code ByteBuffer} holds at most 2^31-1 bytes, so a tensor larger than that cannot be viewed
 * (split the variable).
 *
 * <pre>{@code
 * try (TFloat32 t = TFloat32.vectorOf(1f, 2f, 3f)) {
 *   TensorView v = TensorView.of("w", t);
 *   v.data().getFloat(4);                 // 2.0, read from the tensor's memory
 * }
 * }</pre>
 */
public final class TensorView {
  private final String name;
  private final DType dtype;
  private final long[] shape;
  private final ByteBuffer data;
  private volatile long address;
  private final Tensor tensor;

  private TensorView(String name, DType dtype, long[] shape, ByteBuffer data, long address,
      Tensor tensor) {
    this.name = name;
    this.dtype = dtype;
    this.shape = shape;
    this.data = data;
    this.address = address;
    this.tensor = tensor;
  }

  /**
   * A view over a TensorFlow tensor's native memory (no copy).
   *
   * @throws IllegalArgumentException for string/variable-length tensors, or tensors of 2 GiB or
   *     more
   */
  public static TensorView of(String name, Tensor tensor) {
    Objects.requireNonNull(tensor, "tensor");
    checkName(name);
    DType dtype = DType.of(tensor.dataType());
    long[] shape = tensor.shape().asArray();
    long bytes = tensor.numBytes();
    checkSize(name, dtype, shape, bytes);
    long address = bytes == 0 ? 0L : NativeMemory.address(tensor);
    return new TensorView(name, dtype, shape, NativeMemory.wrap(address, bytes), address, tensor);
  }

  /**
   * A view over a buffer the caller owns (a host snapshot, a plugin's own memory). The buffer's
   * bytes from position 0 to its capacity are the tensor; it is not copied.
   *
   * @throws IllegalArgumentException when the capacity does not match dtype and shape
   */
  public static TensorView of(String name, DType dtype, long[] shape, ByteBuffer data) {
    checkName(name);
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(data, "data");
    long[] s = shape.clone();
    checkSize(name, dtype, s, data.capacity());
    ByteBuffer d = data.duplicate().clear().order(ByteOrder.nativeOrder());
    return new TensorView(name, dtype, s, d, d.isDirect() ? -1L : 0L, null);
  }

  private static void checkName(String name) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("a tensor view needs a non-empty name");
    }
  }

  private static void checkSize(String name, DType dtype, long[] shape, long bytes) {
    long expected = byteSize(dtype, shape);
    if (expected != bytes) {
      throw new IllegalArgumentException("tensor '" + name + "': " + bytes + " bytes given but "
          + dtype + Arrays.toString(shape) + " needs " + expected);
    }
    if (bytes > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("tensor '" + name + "' has " + bytes
          + " bytes; a TensorView holds at most 2^31-1 bytes (ByteBuffer limit): split it");
    }
  }

  static long byteSize(DType dtype, long[] shape) {
    long n = dtype.byteSize();
    for (long d : shape) {
      if (d < 0) {
        throw new IllegalArgumentException("unknown dimension in shape " + Arrays.toString(shape));
      }
      n = Math.multiplyExact(n, d);
    }
    return n;
  }

  /** The tensor's name in the checkpoint (a variable's op name). */
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
    return data.capacity();
  }

  /**
   * A new buffer over the same bytes: position 0, limit = {@link #byteSize()}, native byte
   * order. Writes through it change the tensor; no copy is made.
   */
  public ByteBuffer data() {
    return data.duplicate().clear().order(ByteOrder.nativeOrder());
  }

  /** The native address of the first byte, or 0 when the view wraps a heap buffer. */
  public long address() {
    long a = address;
    if (a == -1L) { // a direct host buffer: found on first use (loads TensorFlow's JNI library)
      a = NativeMemory.address(data);
      address = a;
    }
    return a;
  }

  /** The spec (name, dtype, shape, size) of this view. */
  public TensorSpec spec() {
    return new TensorSpec(name, dtype, shape, data.capacity());
  }

  /** The TensorFlow tensor this view wraps, or null (lets the {@code tf} backend feed it). */
  Tensor tensor() {
    return tensor;
  }

  @Override
  public String toString() {
    return name + " " + dtype + Arrays.toString(shape) + " (" + data.capacity() + " bytes)";
  }
}
