package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;

/**
 * The reference counts a simulated step keeps per device buffer, shared by
 * {@link MemorySimulator} (bytes in use) and {@link BfcReplay} (allocator chunks): which outputs
 * allocate a buffer of their own, and when the last reader of a buffer is done.
 *
 * <p>Resident outputs (variables, constants, feeds) and ref-typed outputs (aliases of a
 * variable) are never counted; outputs that share an input's buffer ({@link BufferAliases})
 * allocate nothing and count their readers on the buffer's owner. Shape-only readers
 * ({@link OpTypes#SHAPE_ONLY}) do not keep a buffer alive.
 */
final class BufferRefs {
  private static final int RESIDENT = -1;
  private static final int ALIAS = -2;

  /** Called for each buffer whose last reader is done. */
  interface Freed {
    /** The buffer owned by output {@code output} of op {@code op} is no longer read. */
    void free(int op, int output);
  }

  private final DataflowGraph g;
  private final TensorId[][] owner;
  private final int[][] refs;

  private BufferRefs(DataflowGraph g) {
    this.g = g;
    this.owner = BufferAliases.owners(g);
    this.refs = new int[g.size()][];
    for (Op op : g.ops()) {
      int[] r = new int[op.outputs().size()];
      boolean pin = MemorySimulator.isPinned(op);
      for (int i = 0; i < r.length; i++) {
        Tensor t = op.output(i);
        if (pin || t.persistent()) {
          r[i] = RESIDENT; // a ref output aliases its variable: no new buffer
        } else if (owner[op.id()][i].op() != op.id()) {
          r[i] = ALIAS; // shares an input's buffer: no new buffer
        }
      }
      refs[op.id()] = r;
    }
    for (Op op : g.ops()) {
      if (OpTypes.SHAPE_ONLY.contains(op.type())) {
        continue;
      }
      for (TensorId in : op.inputs()) {
        TensorId o = owner[in.op()][in.output()];
        if (refs[o.op()][o.output()] >= 0) {
          refs[o.op()][o.output()]++;
        }
      }
    }
  }

  /** Fresh counts for one simulated step of {@code g}. */
  static BufferRefs of(DataflowGraph g) {
    return new BufferRefs(g);
  }

  /** True when output {@code i} of {@code op} allocates a buffer of its own when the op runs. */
  boolean allocates(int op, int i) {
    return refs[op][i] >= 0;
  }

  /** True when output {@code i} of {@code op} allocates a buffer that nobody reads. */
  boolean unread(int op, int i) {
    return refs[op][i] == 0;
  }

  /**
   * Counts down the buffers {@code op} read, now that it has run, and reports each whose last
   * reader it was to {@code freed} (may be null).
   *
   * @return the bytes of the buffers freed
   */
  long release(Op op, Freed freed) {
    if (OpTypes.SHAPE_ONLY.contains(op.type())) {
      return 0;
    }
    long bytes = 0;
    for (TensorId in : op.inputs()) {
      TensorId o = owner[in.op()][in.output()];
      int[] r = refs[o.op()];
      if (r[o.output()] > 0 && --r[o.output()] == 0) {
        bytes += g.tensor(o).bytes();
        if (freed != null) {
          freed.free(o.op(), o.output());
        }
      }
    }
    return bytes;
  }
}
