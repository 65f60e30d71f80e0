package dev.lms4j.checkpoint;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The worker JVM of the fault tests: saves checkpoints of known content with the {@code files}
 * backend in an endless loop, printing {@code saved <step>} after each save returned, until it is
 * killed. Every fourth save replaces the previous step (the replacement path). Arguments: the
 * directory, the total MiB per checkpoint, keep-last-N.
 */
public final class CrashWorker {
  private CrashWorker() {}

  /** Sizes of the tensors of one checkpoint, as fractions of the total (odd sizes on purpose). */
  static long[][] shapes(long totalBytes) {
    long quarter = totalBytes / 4 / 8; // int64 elements per quarter
    return new long[][] {{quarter}, {quarter / 2, 2}, {quarter - 3}, {3, 5}, {quarter + 3}};
  }

  /** The content of tensor {@code idx} at {@code step}: a pattern the test can recompute. */
  static long word(long step, int idx, long k) {
    return (step * 0x9E3779B97F4A7C15L) ^ ((long) idx << 56) ^ (k * 0xC2B2AE3D27D4EB4FL);
  }

  static List<TensorView> views(long step, long totalBytes, List<ByteBuffer> buffers) {
    long[][] shapes = shapes(totalBytes);
    List<TensorView> out = new ArrayList<>();
    for (int i = 0; i < shapes.length; i++) {
      long n = 1;
      for (long d : shapes[i]) {
        n *= d;
      }
      if (buffers.size() <= i) {
        buffers.add(ByteBuffer.allocateDirect((int) (n * 8)).order(ByteOrder.nativeOrder()));
      }
      LongBuffer lb = buffers.get(i).clear().asLongBuffer();
      for (long k = 0; k < n; k++) {
        lb.put(word(step, i, k));
      }
      out.add(TensorView.of("t" + i, DType.INT64, shapes[i], buffers.get(i)));
    }
    return out;
  }

  /** Entry point: {@code CrashWorker DIR MIB KEEP}. */
  public static void main(String[] args) throws IOException {
    Path dir = Path.of(args[0]);
    long bytes = Long.parseLong(args[1]) << 20;
    int keep = Integer.parseInt(args[2]);
    List<ByteBuffer> buffers = new ArrayList<>();
    try (CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir + ",keep=" + keep
        + ",threads=2")) {
      long step = b.latest().map(CheckpointInfo::step).orElse(0L) + 1;
      System.out.println("ready " + step);
      System.out.flush();
      for (int i = 0; ; i++) {
        long s = i % 4 == 3 ? step - 1 : step++;
        b.save(s, Map.of("worker", "crash"), views(s, bytes, buffers));
        System.out.println("saved " + s);
        System.out.flush();
      }
    }
  }
}
