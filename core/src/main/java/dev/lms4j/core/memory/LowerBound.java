package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.TensorId;
import java.util.HashSet;
import java.util.Set;

/**
 * The smallest peak any plan could reach: resident bytes (variables, constants, feeds) plus the
 * largest working set of a single op (its distinct transient input buffers, the outputs it
 * allocates and its kernel scratch; {@link BufferAliases}), which must all be in device memory
 * while the op runs whatever is swapped or recomputed.
 */
public final class LowerBound {
  private LowerBound() {}

  /** The bound in bytes. */
  public static long of(DataflowGraph g) {
    long pinned = 0;
    for (Op op : g.ops()) {
      pinned += MemorySimulator.residentBytes(g, op);
    }
    return pinned + largestOp(g);
  }

  /** The largest single-op working set (transient inputs, outputs and scratch), in bytes. */
  public static long largestOp(DataflowGraph g) {
    long best = 0;
    TensorId[][] owner = BufferAliases.owners(g);
    for (Op op : g.ops()) {
      best = Math.max(best, workingSet(g, op, owner));
    }
    return best;
  }

  /** The name of the op with the largest working set, or null for an empty graph. */
  public static String largestOpName(DataflowGraph g) {
    long best = -1;
    String name = null;
    TensorId[][] owner = BufferAliases.owners(g);
    for (Op op : g.ops()) {
      long w = workingSet(g, op, owner);
      if (w > best) {
        best = w;
        name = op.name();
      }
    }
    return name;
  }

  private static long workingSet(DataflowGraph g, Op op, TensorId[][] owner) {
    if (MemorySimulator.isPinned(op)) {
      return 0;
    }
    long w = g.scratchBytes(op.id());
    for (int i = 0; i < op.outputs().size(); i++) {
      if (!op.output(i).persistent() && owner[op.id()][i].op() == op.id()) {
        w += op.output(i).bytes(); // outputs sharing an input's buffer allocate nothing
      }
    }
    Set<TensorId> seen = new HashSet<>();
    for (TensorId in : op.inputs()) {
      TensorId o = owner[in.op()][in.output()];
      if (seen.add(o) && !MemorySimulator.isPinned(g.op(o.op())) && !g.tensor(o).persistent()) {
        w += g.tensor(o).bytes();
      }
    }
    return w;
  }
}
