package dev.lms4j.checkpoint;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.buffer.ByteDataBuffer;
import org.tensorflow.ndarray.buffer.DataStorageVisitor;

/**
 * Direct {@link ByteBuffer}s over native memory without a copy.
 *
 * <p>TF Java 1.1's {@code ByteDataBuffer} has no {@code asByteBuffer()}. Its raw buffers over a
 * tensor's native memory do report their address through
 * {@link ByteDataBuffer#accept(DataStorageVisitor)} ({@code visit(address, length, scale)}), and
 * JavaCPP's {@link Pointer#asByteBuffer()} wraps an address in a direct buffer (JNI
 * {@code NewDirectByteBuffer}): together they give a {@code ByteBuffer} over the tensor's own bytes.
 */
final class NativeMemory {
  static {
    // JavaCPP's Pointer natives live in TensorFlow's JNI library: load it before any Pointer use
    org.tensorflow.TensorFlow.version();
  }

  private NativeMemory() {}

  /** A JavaCPP pointer at a given address, so {@code asByteBuffer()} can wrap it. */
  private static final class At extends BytePointer {
    At(long address, long bytes) {
      super((Pointer) null);
      this.address = address;
      this.limit = bytes;
      this.capacity = bytes;
    }
  }

  /** The native address of a tensor's data. */
  static long address(Tensor t) {
    ByteDataBuffer data = t.asRawTensor().data();
    Long a = data.accept(new DataStorageVisitor<Long>() {
      @Override
      public Long visit(long address, long length, long scale) {
        return address;
      }

      @Override
      public Long fallback() {
        return null;
      }
    });
    if (a == null) {
      throw new IllegalStateException("tensor data of type " + t.dataType()
          + " is not backed by native memory");
    }
    return a;
  }

  /** A direct, native-order buffer over {@code bytes} bytes at {@code address} (no copy). */
  static ByteBuffer wrap(long address, long bytes) {
    if (bytes == 0) {
      return ByteBuffer.allocateDirect(0).order(ByteOrder.nativeOrder());
    }
    return new At(address, bytes).asByteBuffer().order(ByteOrder.nativeOrder());
  }

  /** The native address of a direct buffer's first byte (position 0), 0 for heap buffers. */
  static long address(ByteBuffer b) {
    return b.isDirect() ? new Pointer(b).address() : 0L;
  }
}
