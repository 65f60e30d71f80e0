package dev.lms4j.tf.run;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The outcome of training steps run in a worker.
 *
 * @param fits        true when every step ran
 * @param oom         true when the run ended by running out of the memory budget
 * @param steps       the steps that ran
 * @param peakBytes   the highest {@code allocator_bytes_in_use} seen in the traced step's
 *                    {@code RunMetadata} step stats (-1 when not measured)
 * @param peakSource  how {@code peakBytes} was measured
 * @param error       what went wrong, or null
 * @param scratchByOp each op's kernel scratch in the traced step, bytes by op name
 *                    ({@code dev.lms4j.tf.ScratchTrace}); empty when not measured
 * @param peakWithScratchBytes the traced peak counting what each kernel held while it ran
 *                    beyond its outputs ({@code ScratchTrace#peakBytesWithScratch}), at least
 *                    {@code peakBytes}; -1 when not measured. Where TensorFlow's own convolution
 *                    kernels run, their col buffers are freed before the step statistics read
 *                    the bytes in use: measured 2026-12-07 on an AVX2-only AMD EPYC, the corpus
 *                    U-Net at its small size has a {@code peakBytes} of 0.2 MiB and needs more
 *                    than 44 MiB
 */
public record RunResult(boolean fits, boolean oom, List<StepRecord> steps, long peakBytes,
    String peakSource, String error, Map<String, Long> scratchByOp, long peakWithScratchBytes) {
  public RunResult {
    steps = List.copyOf(steps);
    scratchByOp = Map.copyOf(scratchByOp);
  }

  /** A result without the peak with scratch. */
  public RunResult(boolean fits, boolean oom, List<StepRecord> steps, long peakBytes,
      String peakSource, String error, Map<String, Long> scratchByOp) {
    this(fits, oom, steps, peakBytes, peakSource, error, scratchByOp, -1);
  }

  /** A result without scratch figures. */
  public RunResult(boolean fits, boolean oom, List<StepRecord> steps, long peakBytes,
      String peakSource, String error) {
    this(fits, oom, steps, peakBytes, peakSource, error, Map.of());
  }

  /**
   * The median step time over the timing samples: every step but the first (warm-up) and the
   * traced one; when that leaves none, every step.
   */
  public double medianMs() {
    double[] ms = steps.stream().filter(s -> s.step() > 1 && !s.traced())
        .mapToDouble(StepRecord::ms).sorted().toArray();
    if (ms.length == 0) {
      ms = steps.stream().mapToDouble(StepRecord::ms).sorted().toArray();
    }
    if (ms.length == 0) {
      return Double.NaN;
    }
    return ms.length % 2 == 1 ? ms[ms.length / 2] : (ms[ms.length / 2 - 1] + ms[ms.length / 2]) / 2;
  }

  /** The losses, in step order. */
  public double[] losses() {
    return steps.stream().mapToDouble(StepRecord::loss).toArray();
  }

  @Override
  public String toString() {
    return (fits ? "fits" : oom ? "OOM" : "failed") + " losses=" + Arrays.toString(losses())
        + " peak=" + peakBytes + (error == null ? "" : " error=" + error);
  }
}
