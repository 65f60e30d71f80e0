package dev.lms4j.tf;

import java.util.Arrays;

/**
 * The sizes of {@code BroadcastGradientArgs}' outputs: for the shapes of a broadcasting binary
 * op's operands, the axes each operand's gradient is summed over. TensorFlow infers no length
 * for them (shape {@code [?]}), so the importer's rule for an unknown first dimension (the batch
 * size) would give each a batch of int32 elements: 8 KiB at batch 2048, where the kernel makes a
 * vector of at most the operands' rank ({@code BCastList} in {@code bcast.h}: the operands'
 * shapes 1-extended to one rank; an axis where one operand is 1 and another is not is summed
 * for the one, an axis where every operand is 1 for every operand). Seen in TensorFlow's
 * allocator log of the corpus mlp-dropout (batch 2048): the model's 8 KiB chunks for the
 * dropout products' gradients filled the head of the region the 4 MiB activations share, and the
 * last activation found no room 4 MiB under where TensorFlow trained.
 *
 * <pre>{@code
 * long[] n = BroadcastArgs.lengths(new long[] {2048, 512}, new long[] {});  // {0, 2}
 * }</pre>
 */
final class BroadcastArgs {
  private BroadcastArgs() {}

  /**
   * The number of axes in each of the two outputs, for operands of shapes {@code s0} and
   * {@code s1} (every dimension known); null where the shapes do not broadcast.
   */
  static long[] lengths(long[] s0, long[] s1) {
    int rank = Math.max(s0.length, s1.length);
    long[] a = extended(s0, rank);
    long[] b = extended(s1, rank);
    long[] n = new long[2];
    for (int d = 0; d < rank; d++) {
      if (a[d] == 1 && b[d] == 1) {
        n[0]++;
        n[1]++;
      } else if (a[d] == 1) {
        n[0]++;
      } else if (b[d] == 1) {
        n[1]++;
      } else if (a[d] != b[d]) {
        return null;
      }
    }
    return n;
  }

  /** {@code s} with leading 1s up to {@code rank}. */
  private static long[] extended(long[] s, int rank) {
    long[] e = new long[rank];
    Arrays.fill(e, 0, rank - s.length, 1);
    System.arraycopy(s, 0, e, rank - s.length, s.length);
    return e;
  }
}
