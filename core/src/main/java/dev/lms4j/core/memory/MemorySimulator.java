package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;

/**
 * Simulates the device memory of one training step run in a given op order, with reference
 * counts as TFLMS's simulator keeps them:
 *
 * <ul>
 *   <li>Variables, constants, feeds and the constants init leaves held for the session
 *       ({@link BfcReplay#HELD}) are resident for the whole step (feeds in host memory cost
 *       nothing, {@link DataflowGraph#hostFeeds()}); other ops' persistent (ref-typed) outputs
 *       alias a variable and cost nothing.</li>
 *   <li>When an op runs, its transient outputs are allocated, and its kernel holds its scratch
 *       ({@link DataflowGraph#scratchBytes(int)}: oneDNN's workspace and reorders, measured by
 *       a trace or estimated from shapes) until it ends; the memory in use at that moment (all
 *       live tensors, the new outputs and the scratch) is the op's sample.</li>
 *   <li>After it runs, each input whose last reader it was is freed, and outputs nobody reads are
 *       freed at once. Shape-only readers ({@link OpTypes#SHAPE_ONLY}) do not keep a buffer
 *       alive: TensorFlow folds them to constants when shapes are static.</li>
 *   <li>Outputs that share an input's buffer ({@link BufferAliases}: {@code Identity},
 *       {@code Reshape}, identity transposes, ...) allocate nothing; the buffer lives until the
 *       last reader of any of the tensors sharing it is done.</li>
 *   <li>On graphs whose kernels reuse buffers ({@link DataflowGraph#inPlaceReuse()}: imported
 *       from TensorFlow), an op that is the only reader of an input buffer its kernel may take
 *       over in place ({@link InPlaceReuse}: element-wise kernels, softmax, the softmax
 *       cross-entropy's gradient in its logits) allocates nothing for that output; the buffer
 *       lives on.</li>
 *   <li>Swap-outs inserted by lms4j read their input like any op and own no device memory;
 *       swap-ins allocate their output like any op, so swap events need no special case.</li>
 * </ul>
 *
 * Not modelled: in-place reuse by the last of several readers of a buffer (it depends on the
 * order the executor picks; {@link BfcReplay} replays it in the order given), the allocator's
 * rounding and fragmentation ({@link BfcReplay} replays those), and an executor order other than
 * the one given ({@code docs/bench/fidelity.md} measures what that leaves).
 */
public final class MemorySimulator {
  private static final Object LEVELLED_PEAK = new Object();

  private MemorySimulator() {}

  /**
   * The simulated peak of {@code g} on its levelled schedule ({@link Levels#schedule()}), once
   * per graph ({@link DataflowGraph#derived}): the planners ask for the peak of the graph as
   * given again and again (each mode's "before", the recompute planner's walk, every re-plan of
   * the allocator check).
   */
  public static long levelledPeak(DataflowGraph g) {
    return g.derived(LEVELLED_PEAK, x -> simulate(x, Levels.of(x).schedule()).peakBytes());
  }

  /**
   * Simulates {@code order} (a topological order of all of {@code g}'s ops).
   *
   * @throws IllegalArgumentException when the order is not a permutation in dependency order
   */
  public static MemoryProfile simulate(DataflowGraph g, int[] order) {
    int n = g.size();
    if (order.length != n) {
      throw new IllegalArgumentException("order has " + order.length + " ops, graph " + n);
    }
    BufferRefs refs = BufferRefs.of(g);
    long pinned = 0;
    for (Op op : g.ops()) {
      pinned += residentBytes(g, op);
    }
    boolean[] done = new boolean[n];
    long[] timeline = new long[n];
    long live = pinned;
    long peak = pinned;
    int peakAt = -1;
    for (int step = 0; step < n; step++) {
      int v = order[step];
      Op op = g.op(v);
      for (int pi = 0, np = g.predecessorCount(v); pi < np; pi++) {
        int p = g.predecessor(v, pi);
        if (!done[p]) {
          throw new IllegalArgumentException("order runs " + op.name() + " before its input "
              + g.op(p).name());
        }
      }
      int outs = op.outputs().size();
      for (int i = 0; i < outs; i++) {
        if (refs.allocates(v, i)) {
          live += op.output(i).bytes();
        }
      }
      long sample = live + g.scratchBytes(v);
      timeline[step] = sample;
      if (sample > peak) {
        peak = sample;
        peakAt = step;
      }
      live -= refs.release(op, null);
      for (int i = 0; i < outs; i++) {
        if (refs.unread(v, i)) {
          live -= op.output(i).bytes();
        }
      }
      done[v] = true;
    }
    return new MemoryProfile(order.clone(), timeline, peak, peakAt, pinned);
  }

  /** True when an op's outputs stay resident for the whole step (constants, feeds, variables). */
  public static boolean isPinned(Op op) {
    return OpTypes.isResident(op.type());
  }

  /**
   * The device memory an op's outputs hold for the whole step: the bytes of a resident op's
   * outputs and of a constant init leaves held for the session ({@link BfcReplay#HELD}), or 0
   * for other ops and for a feed of a graph whose feeds live outside the device
   * ({@link DataflowGraph#hostFeeds()}).
   */
  public static long residentBytes(DataflowGraph g, Op op) {
    if (!isPinned(op) && !BfcReplay.HELD.equals(op.type())
        || g.hostFeeds() && op.type().equals("Placeholder")) {
      return 0;
    }
    long bytes = 0;
    for (Tensor t : op.outputs()) {
      bytes += t.bytes();
    }
    return bytes;
  }
}
