package dev.lms4j.core.memory;

/**
 * In-place reuse that does not depend on the order a step runs in: an op whose kernel may take
 * an input's buffer over for an output ({@link BufferAliases#inPlaceCandidates}) and that is the
 * only reader of that buffer gets it. TensorFlow's executor moves a tensor with one consumer into
 * that consumer's inputs, so the buffer's reference count is one when the kernel asks
 * ({@code forward_input_or_allocate_output}), whatever the order. A chain of such ops (a logits
 * {@code MatMul} whose buffer {@code SoftmaxCrossEntropyWithLogits} takes for its gradient, which
 * the loss gradient's {@code Mul} takes in turn) shares one buffer.
 *
 * <p>Works on flat arrays, so that {@link BufferAliases#owners} (a graph) and the plan
 * simulator (a graph and a plan's inserted ops) decide alike. Where a buffer has several readers,
 * whether the last one may reuse it depends on the order; {@link BufferRefs#forward} decides that
 * as a step is replayed.
 */
public final class InPlaceReuse {
  /** A tensor that is resident (variable, constant, feed) or aliases a variable. */
  public static final int RESIDENT = -1;
  /** A tensor that shares another tensor's buffer. */
  public static final int ALIAS = -2;

  private InPlaceReuse() {}

  /**
   * The ops and tensors of a step, flat: tensors are numbered, op {@code v}'s outputs are
   * {@code firstOut[v]}, {@code firstOut[v] + 1}, ... ({@code candidates[v].length} of them).
   *
   * @param in         per op, the tensors it reads (its data inputs, in order)
   * @param firstOut   per op, the number of its output 0
   * @param candidates per op, per output, the positions of the inputs whose buffer the output may
   *                   take over, in the order the kernel tries them (empty when none)
   * @param shapeOnly  per op, true when it reads shapes only (no buffer)
   * @param bytes      per tensor, its size
   * @param dtype      per tensor, its dtype
   */
  public record Step(int[][] in, int[] firstOut, int[][][] candidates, boolean[] shapeOnly,
      long[] bytes, String[] dtype) {}

  /**
   * Lets outputs take over the buffer of an input they are the only reader of, in {@code order}
   * (topological).
   *
   * @param owner per tensor, the tensor owning its buffer (aliases of forwarding ops already
   *              resolved); updated: an output that takes a buffer over, and its aliases, get
   *              that buffer's owner
   * @param reads per tensor owning a buffer, the reads of that buffer; {@link #RESIDENT} or
   *              {@link #ALIAS} for the others; updated: the buffer taken over is read by its
   *              new readers too, and the output that took it becomes an {@link #ALIAS}
   * @return the number of outputs that took a buffer over
   */
  public static int apply(Step s, int[] order, int[] owner, int[] reads) {
    int[] pending = reads.clone();
    int taken = 0;
    for (int v : order) {
      int[][] cand = s.candidates()[v];
      for (int i = 0; i < cand.length; i++) {
        int t = s.firstOut()[v] + i;
        if (cand[i].length == 0 || reads[t] < 0 || s.bytes()[t] <= 0) {
          continue;
        }
        int[] in = s.in()[v];
        for (int k : cand[i]) {
          if (k >= in.length) {
            continue;
          }
          int o = find(owner, in[k]);
          if (reads[o] < 0 || pending[o] != 1 || s.bytes()[o] != s.bytes()[t]
              || !s.dtype()[o].equals(s.dtype()[t])) {
            continue;
          }
          int n = 0;
          for (int x : in) {
            if (find(owner, x) == o) {
              n++;
            }
          }
          if (n != 1) {
            continue;
          }
          owner[t] = o;
          reads[o] += reads[t];
          pending[o] = reads[t]; // the op's own read is done before any of the output's
          reads[t] = ALIAS;
          taken++;
          break;
        }
      }
    }
    for (int t = 0; t < owner.length; t++) {
      owner[t] = find(owner, t);
    }
    return taken;
  }

  private static int find(int[] owner, int t) {
    int r = t;
    while (owner[r] != r) {
      r = owner[r];
    }
    while (owner[t] != r) {
      int next = owner[t];
      owner[t] = r;
      t = next;
    }
    return r;
  }
}
