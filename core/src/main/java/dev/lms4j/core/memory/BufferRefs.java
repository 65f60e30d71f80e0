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
 *
 * <p>In-place reuse by an op that is the only reader of a buffer does not depend on the order,
 * and every user counts it ({@link BufferAliases#owners}: the output is an alias). Reuse by the
 * last of several readers, where asked for ({@link BfcReplay} asks; {@link MemorySimulator},
 * whose sum the planners aim under, does not, since the executor may run the readers in another
 * order), is decided as the step runs ({@link #forward}): an op
 * ({@link BufferAliases#inPlaceCandidates}) that is the last reader of an input buffer of its
 * output's size takes that buffer over instead of allocating, as TensorFlow's kernels do when
 * the buffer's reference count is one; the buffer then lives until the output's last reader is
 * done.
 */
final class BufferRefs {
  private static final int RESIDENT = -1;
  private static final int ALIAS = -2;
  private static final int REUSED = -3;

  /** Called for each buffer whose last reader is done. */
  interface Freed {
    /** The buffer owned by output {@code output} of op {@code op} is no longer read. */
    void free(int op, int output);
  }

  private final DataflowGraph g;
  private final TensorId[][] owner;
  private final int[][] refs;
  /** Per op and output, the buffer it took over in place ({@link #forward}), or null. */
  private final TensorId[][] reused;

  private final boolean inPlace;

  private BufferRefs(DataflowGraph g, boolean inPlace, boolean[] held) {
    this.g = g;
    this.inPlace = inPlace;
    this.owner = BufferAliases.owners(g);
    this.refs = new int[g.size()][];
    this.reused = new TensorId[g.size()][];
    for (Op op : g.ops()) {
      int[] r = new int[op.outputs().size()];
      boolean pin = MemorySimulator.isPinned(op);
      for (int i = 0; i < r.length; i++) {
        Tensor t = op.output(i);
        if (pin || t.persistent() || held != null && held[op.id()]) {
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
    // a fetched tensor is held by the session until the step ends: a reference never released
    for (TensorId t : g.fetched()) {
      TensorId o = owner[t.op()][t.output()];
      if (refs[o.op()][o.output()] >= 0) {
        refs[o.op()][o.output()]++;
      }
    }
  }

  /** Fresh counts for one simulated step of {@code g}, without in-place reuse. */
  static BufferRefs of(DataflowGraph g) {
    return new BufferRefs(g, false, null);
  }

  /**
   * Fresh counts for one simulated step of {@code g}; with {@code inPlace}, {@link #forward}
   * lets element-wise outputs reuse an input's buffer.
   */
  static BufferRefs of(DataflowGraph g, boolean inPlace) {
    return new BufferRefs(g, inPlace, null);
  }

  /**
   * As {@link #of(DataflowGraph, boolean)}; the ops {@code held} marks hold their outputs for
   * the whole run as constants ({@link BfcReplay#heldAtRun}): resident, never freed or taken
   * over in place.
   */
  static BufferRefs of(DataflowGraph g, boolean inPlace, boolean[] held) {
    return new BufferRefs(g, inPlace, held);
  }

  /** The buffer tensor {@code t} lives in now: its owner, or the buffer that owner took over. */
  private TensorId buffer(TensorId t) {
    TensorId o = owner[t.op()][t.output()];
    while (reused[o.op()] != null && reused[o.op()][o.output()] != null) {
      o = reused[o.op()][o.output()];
    }
    return o;
  }

  /** The buffer tensor {@code t} lives in now (see {@link #buffer}). */
  TensorId bufferOf(TensorId t) {
    return buffer(t);
  }

  /**
   * Decides, just before {@code op} runs, whether its outputs take over an input's buffer in
   * place: per output, the first candidate input ({@link BufferAliases#inPlaceCandidates}) whose
   * buffer is not resident, has the output's size and dtype, and is read by nobody after
   * {@code op}, which reads it once. Such an output then allocates nothing ({@link #allocates}
   * is false) and its readers keep that buffer alive. (Where {@code op} is the buffer's only
   * reader, {@link BufferAliases#owners} has made the output an alias already.)
   *
   * @return true when an output reuses an input's buffer (never when the counts were made
   *     without in-place reuse)
   */
  boolean forward(Op op) {
    int v = op.id();
    if (!inPlace) {
      return false;
    }
    boolean any = false;
    for (int i = 0; i < refs[v].length; i++) {
      if (refs[v][i] >= 0 && forward(op, i)) {
        any = true;
      }
    }
    return any;
  }

  private boolean forward(Op op, int i) {
    int v = op.id();
    Tensor out = op.output(i);
    for (int k : BufferAliases.inPlaceCandidates(op, i)) {
      TensorId o = buffer(op.inputs().get(k));
      if (refs[o.op()][o.output()] != 1) {
        continue; // resident, or read later by another op, or twice by this one
      }
      Tensor in = g.tensor(o);
      if (in.bytes() != out.bytes() || in.bytes() <= 0
          || !java.util.Objects.equals(in.dtype(), out.dtype())) {
        continue;
      }
      if (reads(op, o) != 1) {
        continue;
      }
      if (reused[v] == null) {
        reused[v] = new TensorId[refs[v].length];
      }
      reused[v][i] = o;
      refs[o.op()][o.output()] += refs[v][i]; // op's own read is released after it runs
      refs[v][i] = REUSED;
      return true;
    }
    return false;
  }

  /**
   * True when {@code op}, about to run, is the last reader of input {@code k}'s buffer and reads
   * it once: a buffer not resident whose reference count is one, which its kernel may take over
   * ({@code forward_input}). Asked only where the counts were made for in-place reuse.
   */
  boolean lastReadOnce(Op op, int k) {
    if (!inPlace || k >= op.inputs().size()) {
      return false;
    }
    TensorId o = buffer(op.inputs().get(k));
    return refs[o.op()][o.output()] == 1 && reads(op, o) == 1;
  }

  /** How many of {@code op}'s inputs live in buffer {@code o}. */
  private int reads(Op op, TensorId o) {
    int reads = 0;
    for (TensorId t : op.inputs()) {
      if (buffer(t).equals(o)) {
        reads++;
      }
    }
    return reads;
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
      TensorId o = buffer(in);
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
