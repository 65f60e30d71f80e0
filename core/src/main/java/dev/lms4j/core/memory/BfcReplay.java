package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.ScratchEstimates;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Consumer;

/**
 * Replays one training step's allocations through a model of TensorFlow's BFC allocator under a
 * memory limit, to tell whether the step fits where {@link MemorySimulator}'s sum of live bytes
 * cannot: the allocator hands out whole chunks, and a chunk is split only when it is at least
 * twice the request (or the rest is 128 MiB or more), so a 49 MiB tensor placed in a fresh
 * 64 MiB region holds all 64 MiB. Regions grow as the BFC allocator grows them with
 * {@code allow_growth}: the first is 2 MiB, each later one twice the size of the one before
 * (or as large as the request needs), never more than what is left under the limit.
 *
 * <p>What is allocated, in this order: the constants TensorFlow holds outside the step (ops of
 * type {@link #HELD}), resident tensors (variables, constants, feeds unless they live in host
 * memory, {@link DataflowGraph#hostFeeds()}) in op order, as
 * {@code init} and the first step create them, but for the variables that share a held
 * constant's buffer ({@link DataflowGraph#initShared()}), each of which gets its own at its first
 * update in the first step; then per op of {@code order} its
 * outputs that own a buffer ({@link BufferAliases}), its kernel scratch (freed when the op ends),
 * and the inputs and outputs nobody reads any more are freed, with the reference counts
 * {@link MemorySimulator} keeps ({@link BufferRefs}); then the step once more ({@link #STEPS}),
 * in the regions the first one grew, as every later step of training runs. Sizes are rounded to
 * the allocator's 256 bytes.
 *
 * <p>Unlike {@link MemorySimulator}, the replay lets element-wise kernels reuse an input's
 * buffer in place when they are its last reader ({@link BufferAliases#inPlaceCandidates}), as
 * TensorFlow's do: in a traced step of an unrolled GRU (corpus {@code gru}) every running
 * gradient accumulation ({@code AddV2}), {@code AddN}, {@code Sigmoid}, {@code Tanh}, their
 * gradients and most {@code Mul}s allocated nothing. Without it the replay asks for a new
 * chunk per accumulated partial gradient while the sum and the partial are alive, and predicts
 * the smallest budget of one plan too high and of another too low (fragmentation between
 * 640 KiB chunks decides which).
 *
 * <p>An op's outputs are allocated in the order its kernel allocates them
 * ({@link ScratchEstimates#outputAllocationOrder}: oneDNN's batch norm allocates its per-channel
 * outputs before y, and they take the free chunk y would have fitted in). Re-predicted on the
 * very plans of {@code docs/bench/fidelity-planners-zoo.md}, that order brought 35 of its 50
 * measured rows within 5% of the smallest budget that trains, against 30 with outputs in index
 * order, and moved none away from it.
 *
 * <p>Not modelled: allocations TensorFlow makes for itself (the session, grappler's constant
 * folding; of the folding, only the first region it grows before a primer made first is),
 * init's temporaries (an initial value computed on the device for a variable kept on the host;
 * {@link #replayInit} replays the init run on its own),
 * a kernel's temporaries beside its outputs other than its scratch (oneDNN's batch norm
 * allocates one of y/8 bytes at 16 and 32 channels), and the executor's own order (the caller
 * passes the order to replay).
 */
public final class BfcReplay {
  /**
   * The op type of a constant TensorFlow holds for the whole session outside the step (an
   * initializer folded by the init run): its output is persistent and resident for every step
   * ({@link MemorySimulator#residentBytes}), and the replay allocates it before the resident
   * tensors.
   */
  public static final String HELD = "InitHeldConst";

  /** The name a failed primer allocation is reported under ({@link Layout#primerBytes}). */
  public static final String PRIMER = "(primer)";

  /** The name grappler's constant folding's allocations before init are logged under. */
  static final String FOLDING = "(constant folding)";

  /** The size of one of them (TensorFlow's were 4 to 400 bytes). */
  static final long FOLDING_BYTES = 256;

  /**
   * Steps replayed after the resident tensors: two, as the probe runs them. The first step grows
   * the regions; the second runs in them, and can fail where the first did not (measured: the
   * corpus encoder's auto plan for 70 MiB, framework Adam, ran its first step under 71 MiB and
   * ran out of memory allocating 4 KiB in the second step's SoftmaxCrossEntropyWithLogits: the
   * allocator's dump showed its 71 MiB of regions full, a 29.3 MiB chunk of the 32 MiB region
   * holding a 15.6 MiB tensor whole, as the first step's frees had left it).
   */
  public static final int STEPS = 2;

  private static final long MIN_ALLOCATION = 256;
  private static final long FIRST_REGION = 2L << 20;
  /**
   * The largest result of the step the model takes grappler to fold into a constant
   * ({@code kMaxConstantSize} in TensorFlow 2.x's {@code constant_folding.cc}: 100 KiB); a larger
   * one is computed in the step. (Grappler also folds larger uniform fills; the model holds those
   * only for init, {@code InitHeldConstants}.)
   */
  static final long MAX_FOLDED_BYTES = 100 * 1024;
  private static final Object HELD_AT_RUN = new Object();
  private static final long MAX_INTERNAL_FRAGMENTATION = 128L << 20;

  /**
   * What a replay found.
   *
   * @param fits         every allocation succeeded
   * @param peakInUse    the highest sum of chunks in use (what TensorFlow reports as bytes in
   *                     use), up to the failure
   * @param regionBytes  the regions allocated at the end (or at the failure)
   * @param failedOp     the op whose allocation failed, or null
   * @param failedBytes  the size of the allocation that failed, or 0
   * @param roomBytes    the regions there were before the layout's last variables were
   *                     allocated (all of them for the graph's order): where the step finds room
   *                     beside the last variables
   */
  public record Result(boolean fits, long peakInUse, long regionBytes, String failedOp,
      long failedBytes, long roomBytes) {}

  /**
   * The order the resident tensors are created in before the first step. The BFC allocator grows
   * regions of doubling sizes but never past what is left under its limit, and a chunk less than
   * twice a request is handed out whole: a variable created while most of the limit is still
   * free gets a region of the next power of two and keeps all of it (a 49 MiB table in a 64 MiB
   * region), while one created last gets a region cut to what is left. So the largest variables
   * are created last, and a primer (a tensor allocated and freed just before them) first grows a
   * region that the smaller tensors and the step's working set then share.
   *
   * @param last        ops whose resident outputs are allocated after every other resident, in
   *                    this order (op ids)
   * @param primerBytes the size of the tensor allocated and freed before them (0: none)
   * @param primerFirst the primer is allocated before every resident instead, but after the
   *                    constants held outside the step ({@link #HELD}: grappler's folding
   *                    builds them before init's first op); it then sets the size of the region
   *                    the small variables and the step share
   */
  public record Layout(int[] last, long primerBytes, boolean primerFirst) {
    /** Every resident in op order, no primer: the order init creates them in as given. */
    public static final Layout GRAPH_ORDER = new Layout(new int[0], 0);

    /** A layout whose primer (if any) comes just before the last variables. */
    public Layout(int[] last, long primerBytes) {
      this(last, primerBytes, false);
    }

    public Layout {
      last = last.clone();
      if (primerBytes < 0) {
        throw new IllegalArgumentException("primer bytes must not be negative: " + primerBytes);
      }
    }

    /** True for the order as given. */
    public boolean isGraphOrder() {
      return last.length == 0 && primerBytes == 0;
    }

    @Override
    public int[] last() {
      return last.clone();
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Layout l && Arrays.equals(last, l.last) && primerBytes == l.primerBytes
          && primerFirst == l.primerFirst;
    }

    @Override
    public int hashCode() {
      return 31 * (31 * Arrays.hashCode(last) + Long.hashCode(primerBytes))
          + Boolean.hashCode(primerFirst);
    }

    @Override
    public String toString() {
      return "Layout[last=" + Arrays.toString(last) + ", primerBytes=" + primerBytes
          + (primerFirst ? ", first" : "") + "]";
    }
  }

  private BfcReplay() {}

  /** Replays {@code order} (a topological order of all of {@code g}'s ops) under {@code limit}. */
  public static Result replay(DataflowGraph g, int[] order, long limit) {
    return replay(g, order, limit, Layout.GRAPH_ORDER);
  }

  /**
   * Replays {@code order} under {@code limit}, the resident tensors created as {@code layout}
   * says.
   */
  public static Result replay(DataflowGraph g, int[] order, long limit, Layout layout) {
    return replay(g, order, limit, layout, ScratchEstimates.host());
  }

  /**
   * As {@link #replay(DataflowGraph, int[], long, Layout)}, each op's outputs allocated in the
   * order its kernel allocates them on {@code host}
   * ({@link ScratchEstimates#outputAllocationOrder}).
   */
  public static Result replay(DataflowGraph g, int[] order, long limit, Layout layout,
      ScratchEstimates.Host host) {
    return replay(g, order, limit, layout, host, null);
  }

  /**
   * As {@link #replay(DataflowGraph, int[], long, Layout)}, replaying {@code steps} steps after
   * the resident tensors ({@link #STEPS} by default).
   */
  public static Result replay(DataflowGraph g, int[] order, long limit, Layout layout,
      int steps) {
    if (steps < 1) {
      throw new IllegalArgumentException("at least one step: " + steps);
    }
    return replay(g, order, limit, layout, ScratchEstimates.host(), null, steps);
  }

  /**
   * The chunks in use while each op of {@code order} runs (its outputs and its scratch
   * allocated, its inputs not yet freed), per position in {@code order}, in bytes, in the last
   * of the {@link #STEPS} steps (the one the fidelity bench traces); -1 from the op whose
   * allocation fails on (in whichever step it fails). This is what TensorFlow's step stats
   * report per op as the allocator's bytes in use (the fidelity bench compares them op by op).
   */
  public static long[] inUseWhileRunning(DataflowGraph g, int[] order, long limit,
      Layout layout) {
    long[] during = new long[order.length];
    Arrays.fill(during, -1);
    replay(g, order, limit, layout, ScratchEstimates.host(), during);
    return during;
  }

  private static Result replay(DataflowGraph g, int[] order, long limit, Layout layout,
      ScratchEstimates.Host host, long[] during) {
    return replay(g, order, limit, layout, host, during, STEPS);
  }

  /**
   * As {@link #replay(DataflowGraph, int[], long, Layout)}, writing every request the model
   * makes to {@code requests}, one line each in the format of TensorFlow's allocator log as
   * lms4j writes it ({@code LMS4J_BFC_LOG}): {@code R bytes} for a region grown,
   * {@code A bytes region offset op} for a granted request, {@code F n} for the n-th granted
   * request (from 0) freed, {@code X bytes op} for the request refused. Side by side with
   * TensorFlow's, the first line that differs is where the model's request sequence leaves
   * TensorFlow's.
   */
  public static Result requests(DataflowGraph g, int[] order, long limit, Layout layout,
      Consumer<String> requests) {
    return replay(g, order, limit, layout, ScratchEstimates.host(), null, STEPS, requests);
  }

  private static Result replay(DataflowGraph g, int[] order, long limit, Layout layout,
      ScratchEstimates.Host host, long[] during, int steps) {
    return replay(g, order, limit, layout, host, during, steps, null);
  }

  private static Result replay(DataflowGraph g, int[] order, long limit, Layout layout,
      ScratchEstimates.Host host, long[] during, int steps,
      Consumer<String> requests) {
    Allocator bfc = new Allocator(limit);
    bfc.log = requests;
    long[][] chunk = new long[g.size()][];
    boolean[] later = new boolean[g.size()];
    for (int v : layout.last) {
      later[v] = true;
    }
    if (layout.primerFirst) {
      // grappler's constant folding evaluates init's foldable ops on the device before init's
      // executor runs its first op: tiny tensors, allocated and freed, that grow the allocator's
      // first region (2 MiB) before the primer can. Measured on the zoo LeNet (batch 100, an
      // AVX2-only AMD EPYC, 2026-12-07, LMS4J_BFC_LOG): auto's plan for 61 MiB with a 16 MiB
      // primer first and the dense kernel last; TensorFlow grew regions of 2, 16, 16 and 27 MiB,
      // the replay without this 16, 16 and 29, and the filter gradient's 21.5 MiB col buffer
      // found no room in the 27 (the replay said the layout needs 57 MiB; it needed 89)
      if (!allocatedAndFreed(bfc, FOLDING, FOLDING_BYTES)) {
        return bfc.failed(FOLDING, FOLDING_BYTES);
      }
    }
    // the constants held outside the step first: the same folding builds them before init's
    // first op, so before a primer init makes first. Measured on corpus embedding-resource
    // (bench size, the AVX2-only AMD EPYC, 2026-12-07, LMS4J_BFC_LOG): auto's plan for 59 MiB
    // (an 8 MiB primer first, the 48.8 MiB table last); TensorFlow put the 1 MiB held fill in
    // the first region (whole: its free chunk was less than twice that), grew a 4 MiB region for
    // the next held fill and only then the primer's 8 MiB, and the table's region found 47 MiB
    // left under 61 MiB. The replay with the primer before them said 59 MiB; 63 trained
    for (Op op : g.ops()) {
      chunk[op.id()] = new long[op.outputs().size()];
      if (HELD.equals(op.type())) {
        long failed = allocateOutputs(bfc, op);
        if (failed > 0) {
          return bfc.failed(op.name(), failed);
        }
      }
    }
    if (layout.primerFirst && !allocatedAndFreed(bfc, PRIMER, layout.primerBytes)) {
      return bfc.failed(PRIMER, layout.primerBytes);
    }
    // then the other tensors resident in device memory (variables, constants, feeds where they
    // do not stay in host memory); a resource variable assigned from a held constant adopts its
    // buffer, and gets one of its own at its first update (below)
    boolean[] shared = new boolean[g.size()];
    boolean[] copied = new boolean[g.size()];
    boolean anyShared = false;
    for (String name : g.initShared()) {
      Op op = g.op(name).orElse(null);
      if (op != null && MemorySimulator.residentBytes(g, op) > 0) {
        shared[op.id()] = true;
        anyShared = true;
      }
    }
    for (Op op : g.ops()) {
      if (!HELD.equals(op.type()) && !later[op.id()] && !shared[op.id()]
          && MemorySimulator.residentBytes(g, op) > 0) {
        long failed = allocateOutputs(bfc, op);
        if (failed > 0) {
          return bfc.failed(op.name(), failed);
        }
      }
    }
    if (!layout.primerFirst && !allocatedAndFreed(bfc, PRIMER, layout.primerBytes)) {
      return bfc.failed(PRIMER, layout.primerBytes);
    }
    bfc.room = layout.last.length > 0 ? bfc.regions : -1;
    for (int v : layout.last) {
      if (shared[v]) {
        continue;
      }
      long failed = allocateOutputs(bfc, g.op(v));
      if (failed > 0) {
        return bfc.failed(g.op(v).name(), failed);
      }
    }
    // what grappler folds into constants the step's executor builds when it is created, before
    // the first step's first op, and holds
    boolean[] held = heldAtRun(g);
    for (int v : order) {
      if (held[v]) {
        Op op = g.op(v);
        bfc.op = op.name();
        for (int i = 0; i < op.outputs().size(); i++) {
          long bytes = op.output(i).bytes();
          if (bytes > 0) {
            long at = bfc.allocate(bytes);
            if (at < 0) {
              return bfc.failed(op.name(), bytes);
            }
            chunk[v][i] = at;
          }
        }
      }
    }
    Set<Long> stepChunks = new HashSet<>();
    BufferRefs.Freed free = (o, i) -> {
      if (g.op(o).output(i).bytes() > 0 && stepChunks.remove(chunk[o][i])) {
        bfc.free(chunk[o][i]);
      }
    };
    for (int step = 0; step < steps; step++) {
      // a later step runs in the regions the first one grew: no region is added while the
      // chunks the first step freed (coalesced where they were adjacent) can hold a request
      BufferRefs refs = BufferRefs.of(g, true, held);
      for (int pos = 0; pos < order.length; pos++) {
        int v = order[pos];
        Op op = g.op(v);
        int outs = op.outputs().size();
        bfc.op = op.name();
        refs.forward(op);
        // a variable init left sharing a held constant's buffer gets its own copy when an
        // update first writes it (TensorFlow copies a shared buffer before updating in place),
        // in the order the update reads its variables. Measured on corpus embedding-resource
        // (2026-12-07, LMS4J_BFC_LOG): init allocated nothing for the momentum slots and biases
        // filled from held constants; the first step's ResourceApplyMomentum of fc1_w allocated
        // 1 MiB, that of each bias two chunks of its size
        if (anyShared && step == 0 && OpTypes.isVariableWriter(op.type())) {
          for (TensorId in : op.inputs()) {
            if (shared[in.op()] && !copied[in.op()]) {
              copied[in.op()] = true;
              long bytes = g.op(in.op()).output(in.output()).bytes();
              long at = bfc.allocate(bytes);
              if (at < 0) {
                return failedAt(bfc, op, bytes, during, pos);
              }
              chunk[in.op()][in.output()] = at;
            }
          }
        }
        // a kernel that computes into a temporary and then copies it into its output asks for
        // the temporary first (ScratchEstimates#scratchFirst)
        long firstAt = -1;
        long firstBytes = held[v] || !ScratchEstimates.scratchFirst(op) ? 0
            : g.scratchBytes(op.id());
        if (firstBytes > 0) {
          firstAt = bfc.allocate(firstBytes);
          if (firstAt < 0) {
            return failedAt(bfc, op, firstBytes, during, pos);
          }
        }
        for (int k = 0; k < outs; k++) {
          int i = ScratchEstimates.allocatedOutput(op, host, k);
          long bytes = op.output(i).bytes();
          if (!held[v] && refs.allocates(v, i) && bytes > 0) {
            long at = bfc.allocate(bytes);
            if (at < 0) {
              return failedAt(bfc, op, bytes, during, pos);
            }
            chunk[v][i] = at;
            stepChunks.add(at);
          }
        }
        // the scratch asked for after the outputs, all of it freed as the op ends
        long[] after = held[v] || firstAt >= 0 ? new long[0] : scratchChunks(g, op, refs, host);
        long[] at = new long[after.length];
        for (int c = 0; c < after.length; c++) {
          at[c] = bfc.allocate(after[c]);
          if (at[c] < 0) {
            return failedAt(bfc, op, after[c], during, pos);
          }
        }
        if (during != null) {
          during[pos] = bfc.inUse;
        }
        if (firstAt >= 0) {
          bfc.free(firstAt);
        }
        for (long a : at) {
          bfc.free(a);
        }
        release(refs, op, free);
      }
      // what the step still holds (its fetched outputs) is released when it ends
      stepChunks.forEach(bfc::free);
      stepChunks.clear();
    }
    return new Result(true, bfc.peak, bfc.regions, null, 0,
        bfc.room < 0 ? bfc.regions : bfc.room);
  }

  /**
   * Frees what {@code op} was the last reader of, and its own outputs nobody reads, once it has
   * run.
   */
  private static void release(BufferRefs refs, Op op, BufferRefs.Freed free) {
    refs.release(op, free);
    for (int i = 0; i < op.outputs().size(); i++) {
      if (refs.unread(op.id(), i)) {
        free.free(op.id(), i);
      }
    }
  }

  /** The failure of {@code op}'s allocation at {@code pos}; -1 in {@code during} from there. */
  private static Result failedAt(Allocator bfc, Op op, long bytes, long[] during, int pos) {
    if (during != null) {
      Arrays.fill(during, pos, during.length, -1);
    }
    return bfc.failed(op.name(), bytes);
  }

  /**
   * The chunks {@code op}'s scratch is asked for in after its outputs: the estimate's where the
   * kernel asks for several ({@link ScratchEstimates#estimateChunks}: a float16 product's
   * copies), else one of {@link #scratchBytes} (none when it is 0). The estimate is split only
   * for an op with scratch (the graph caches its figure; most ops have none).
   */
  private static long[] scratchChunks(DataflowGraph g, Op op, BufferRefs refs,
      ScratchEstimates.Host host) {
    if (op.scratch() == Op.SCRATCH_UNKNOWN && g.scratchBytes(op.id()) > 0) {
      long[] chunks = ScratchEstimates.estimateChunks(g, op, host);
      if (chunks.length > 1) {
        return chunks;
      }
    }
    long scratch = scratchBytes(g, op, refs);
    return scratch > 0 ? new long[] {scratch} : new long[0];
  }

  /**
   * The scratch {@code op} allocates as it runs now: the graph's figure, less an estimated copy
   * of an input whose buffer the kernel takes over because the op is its last reader
   * ({@link ScratchEstimates#forwardableInputCopy}). A measured scratch is taken as it is.
   */
  private static long scratchBytes(DataflowGraph g, Op op, BufferRefs refs) {
    long scratch = g.scratchBytes(op.id());
    if (op.scratch() != Op.SCRATCH_UNKNOWN || scratch <= 0) {
      return scratch;
    }
    long[] copy = ScratchEstimates.forwardableInputCopy(g, op);
    if (copy != null && refs.lastReadOnce(op, (int) copy[0])) {
      return Math.max(0, scratch - copy[1]);
    }
    return scratch;
  }

  /**
   * Allocates and frees {@code bytes} for {@code op} (a primer, or the constant folding's
   * tensors; nothing for 0); false when it does not fit.
   */
  private static boolean allocatedAndFreed(Allocator bfc, String op, long bytes) {
    if (bytes <= 0) {
      return true;
    }
    bfc.op = op;
    long at = bfc.allocate(bytes);
    if (at < 0) {
      return false;
    }
    bfc.free(at);
    return true;
  }

  /**
   * The step's ops grappler's constant folding turns into constants (shape reads, and what is
   * computed from constants and shapes alone, {@link DataflowGraph#constantFoldable}) whose
   * outputs are at most {@link #MAX_FOLDED_BYTES} each: they allocate nothing as the step runs,
   * their constants are held from the executor's creation on. Measured with TensorFlow's own
   * allocation log ({@code TF_CPP_VMODULE=bfc_allocator=4}) on the corpus U-Net's tflms plan
   * for 18 MiB: a step made 30 allocations of at most 256 bytes where the replay made 92 (its 48
   * Shape, 8 ShapeN, 8 ConcatOffset, 4 BroadcastGradientArgs, ...), and those small chunks,
   * held until the backward pass read them, split the large free chunks the real allocator kept
   * whole (a 2 MiB Concat found no room at 14 MiB in the replay, where TensorFlow trained).
   */
  static boolean[] heldAtRun(DataflowGraph g) {
    return g.derived(HELD_AT_RUN, BfcReplay::computeHeldAtRun);
  }

  private static boolean[] computeHeldAtRun(DataflowGraph g) {
    boolean[] folded = g.constantFoldable();
    // a shape grappler cannot infer (a fed tensor's, where nothing fixes it again; where the
    // graph does not say, every shape a feed leads to) is read in the step, as is what is
    // computed from it (DataflowGraph#shapeDynamic). Measured with TensorFlow's executor log
    // (TF_CPP_VMODULE=executor=1) on the corpus MobileNet: gradients/Shape_54, the shape of the
    // stem's Relu6, ran as a Shape in every step and allocated its 16 bytes where it ran, while
    // gradients/Shape_55, a weight's shape, ran as a Const
    boolean[] fed = g.shapeDynamic();
    boolean[] held = new boolean[g.size()];
    for (Op op : g.ops()) {
      int v = op.id();
      if (!folded[v] || fed[v] || OpTypes.CONSTANTS.contains(op.type()) || HELD.equals(op.type())
          || MemorySimulator.residentBytes(g, op) > 0) {
        continue;
      }
      boolean small = true;
      for (Tensor t : op.outputs()) {
        small &= t.bytes() <= MAX_FOLDED_BYTES;
      }
      held[v] = small;
    }
    return held;
  }

  /** Allocates every output of a resident op; the size of the one that does not fit, or 0. */
  private static long allocateOutputs(Allocator bfc, Op op) {
    bfc.op = op.name();
    for (Tensor t : op.outputs()) {
      if (t.bytes() > 0 && bfc.allocate(t.bytes()) < 0) {
        return t.bytes();
      }
    }
    return 0;
  }

  /** The ops that give an uninitialized variable its value in init. */
  private static final Set<String> INIT_ASSIGNS = Set.of("Assign", "AssignVariableOp");

  /**
   * Replays the init run alone: {@code init} is the graph model of the ops the init op needs
   * (variables, their initializers, the optimizer's slot fills). Variables hold no memory until
   * assigned; an {@code Assign} or {@code AssignVariableOp} whose value's buffer nobody reads
   * after it takes that buffer over for the variable (TensorFlow's {@code forward_input} where
   * the reference count is one), else the variable gets a buffer of its own that the value is
   * copied into; the initializers' temporaries are freed after their last reader, element-wise
   * kernels reuse their input's buffer in place as in a step. The constants the run's executor
   * holds (the graph's constants, and {@code held}: what grappler folds into constants, e.g. a
   * slot's zeros {@code Fill} of a variable's shape) are allocated first and never freed.
   *
   * @param init  the init run's graph model
   * @param order a topological order of {@code init}
   * @param limit the allocator's limit
   * @param held  names of ops whose outputs the executor holds as constants (the caller knows
   *              the GraphDef: {@code InitHeldConstants.folded})
   */
  public static Result replayInit(DataflowGraph init, int[] order, long limit,
      Set<String> held) {
    Allocator bfc = new Allocator(limit);
    int n = init.size();
    boolean[] constant = new boolean[n];
    for (Op op : init.ops()) {
      constant[op.id()] = held.contains(op.name())
          || MemorySimulator.isPinned(op) && !OpTypes.VARIABLES.contains(op.type())
          && !(init.hostFeeds() && op.type().equals("Placeholder"));
      long failed = constant[op.id()] ? allocateOutputs(bfc, op) : 0;
      if (failed > 0) {
        return bfc.failed(op.name(), failed);
      }
    }
    BufferRefs refs = BufferRefs.of(init, true, constant);
    long[][] chunk = new long[n][];
    Set<Long> live = new HashSet<>();
    BufferRefs.Freed free = (o, i) -> {
      if (chunk[o] != null && live.remove(chunk[o][i])) {
        bfc.free(chunk[o][i]);
      }
    };
    for (int v : order) {
      Op op = init.op(v);
      bfc.op = op.name();
      chunk[v] = new long[op.outputs().size()];
      if (!constant[v] && !MemorySimulator.isPinned(op)) {
        refs.forward(op);
        if (INIT_ASSIGNS.contains(op.type()) && op.inputs().size() >= 2) {
          TensorId value = op.inputs().get(1);
          long bytes = init.tensor(value).bytes();
          if (refs.lastReadOnce(op, 1)) {
            TensorId b = refs.bufferOf(value);
            if (chunk[b.op()] != null) {
              live.remove(chunk[b.op()][b.output()]); // the variable's now: never freed
            }
          } else if (bytes > 0 && bfc.allocate(bytes) < 0) {
            return bfc.failed(op.name(), bytes);
          }
        } else {
          for (int i = 0; i < op.outputs().size(); i++) {
            long bytes = op.output(i).bytes();
            if (refs.allocates(v, i) && bytes > 0) {
              long at = bfc.allocate(bytes);
              if (at < 0) {
                return bfc.failed(op.name(), bytes);
              }
              chunk[v][i] = at;
              live.add(at);
            }
          }
        }
      }
      release(refs, op, free);
    }
    return new Result(true, bfc.peak, bfc.regions, null, 0, bfc.regions);
  }

  /**
   * What the init run alone needs of the allocator ({@link #replayInit}), in whole MiB, in two
   * orders: TensorFlow's executor order for a graph as given is not the same from one process to
   * the next (grappler hands it the graph in another node order), and where the initializers'
   * temporaries are large, the order decides where small tensors find room beside them.
   *
   * @param bestMib       in the order that, of the ready ops, runs the one with the smallest
   *                      outputs first (the small tensors share the first regions, the large
   *                      ones get regions of their own): about the least any order needs
   * @param graphOrderMib in the executor's first-in-first-out order over the graph's own order
   *                      ({@link dev.lms4j.core.graph.ExecutorOrder}, every op unchained)
   */
  public record InitNeed(long bestMib, long graphOrderMib) {}

  /**
   * {@link #smallestInitMib} of {@code init} in the two orders of {@link InitNeed}; -1 in either
   * where init does not fit under {@code maxMib}.
   */
  public static InitNeed initNeed(DataflowGraph init, long maxMib, Set<String> held) {
    boolean[] all = new boolean[init.size()];
    Arrays.fill(all, true);
    int[] fifo = dev.lms4j.core.graph.ExecutorOrder.of(init, init.topologicalOrder(), all);
    long graphOrder = smallestInitMib(init, fifo, maxMib, held);
    long best = smallestInitMib(init, smallestFirst(init), maxMib, held);
    if (best < 0 || graphOrder >= 0 && graphOrder < best) {
      best = graphOrder;
    }
    return new InitNeed(best, graphOrder);
  }

  /**
   * A topological order of {@code g} that takes, of the ready ops, the one whose outputs hold the
   * fewest bytes first (ties: the lower id).
   */
  static int[] smallestFirst(DataflowGraph g) {
    long[] bytes = new long[g.size()];
    for (Op op : g.ops()) {
      for (Tensor t : op.outputs()) {
        bytes[op.id()] += Math.max(0, t.bytes());
      }
    }
    return g.topologicalOrder(Comparator.<Integer>comparingLong(v -> bytes[v])
        .thenComparingInt(v -> v));
  }

  /**
   * The smallest limit, in whole MiB up to {@code maxMib}, under which {@link #replayInit} fits,
   * or -1 when it does not fit under {@code maxMib}.
   */
  public static long smallestInitMib(DataflowGraph init, int[] order, long maxMib,
      Set<String> held) {
    return smallestFitting(maxMib, mib -> replayInit(init, order, mib << 20, held).fits());
  }

  /**
   * The smallest whole MiB up to {@code maxMib} that {@code fits}, by bisection, or -1 where
   * {@code maxMib} does not.
   */
  private static long smallestFitting(long maxMib, java.util.function.LongPredicate fits) {
    if (!fits.test(maxMib)) {
      return -1;
    }
    long lo = 0;
    long hi = maxMib;
    while (hi - lo > 1) {
      long mid = (lo + hi) >>> 1;
      if (fits.test(mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return hi;
  }

  /**
   * The smallest limit, in whole MiB up to {@code maxMib}, under which the replay of
   * {@code order} fits, or -1 when it does not fit under {@code maxMib}. Bisection: a larger
   * limit can place regions differently, so a few MiB around the answer may disagree.
   */
  public static long smallestMib(DataflowGraph g, int[] order, long maxMib) {
    return smallestMib(g, order, maxMib, Layout.GRAPH_ORDER);
  }

  /** As {@link #smallestMib(DataflowGraph, int[], long)}, the residents created as laid out. */
  public static long smallestMib(DataflowGraph g, int[] order, long maxMib, Layout layout) {
    return smallestMib(g, order, maxMib, layout, STEPS);
  }

  /**
   * As {@link #smallestMib(DataflowGraph, int[], long, Layout)}, replaying {@code steps} steps
   * (the fidelity benches compare one step with {@link #STEPS}).
   */
  public static long smallestMib(DataflowGraph g, int[] order, long maxMib, Layout layout,
      int steps) {
    return smallestFitting(maxMib, mib -> replay(g, order, mib << 20, layout, steps).fits());
  }

  /**
   * The allocator model: TensorFlow's BFC allocator under a limit, its regions grown in
   * doubling sizes (each below the one before) and cut to what is left, chunks taken by best fit
   * on (size, address), split when at least twice the request, coalesced within a region when
   * freed. Checked against TensorFlow's own placements ({@code AllocatorLog#check}, for any run
   * and in {@code AllocatorLogTest} on two recorded ones): fed the requests TensorFlow logged, it
   * puts every chunk where TensorFlow did.
   */
  public static final class Allocator {
    private final long limit;
    private long regions;
    private long nextRegionBytes;
    private long nextAddress = 1L << 50;
    private long inUse;
    private long peak;
    /** Each region's address and size, in the order they were grown. */
    private final List<long[]> grown = new ArrayList<>();
    /** The regions before a layout's last variables, or -1. */
    private long room = -1;
    /** Every chunk by address; a region's chunks are adjacent, regions are not. */
    private final TreeMap<Long, long[]> chunks = new TreeMap<>(); // addr -> {size, used, region}
    private final TreeSet<long[]> free = new TreeSet<>(
        Comparator.<long[]>comparingLong(c -> c[0]).thenComparingLong(c -> c[1]));
    /** Where the requests are written ({@link #requests}), or null. */
    private Consumer<String> log;
    /** The op the requests are made for (for the log). */
    private String op = "?";
    /** The index of each chunk's request, by address (for the log's frees). */
    private final Map<Long, Integer> requestAt = new HashMap<>();
    private int requests;

    public Allocator(long limit) {
      this.limit = limit;
      this.nextRegionBytes = rounded(Math.min(limit, FIRST_REGION));
    }

    static long rounded(long bytes) {
      return Math.max(MIN_ALLOCATION, (bytes + MIN_ALLOCATION - 1) / MIN_ALLOCATION
          * MIN_ALLOCATION);
    }

    /** The address of a new chunk, or -1 when the limit is reached. */
    public long allocate(long bytes) {
      long want = rounded(bytes);
      long[] c = free.ceiling(new long[] {want, -1});
      if (c == null) {
        if (!extend(want)) {
          if (log != null) {
            log.accept("X " + bytes + " " + op);
          }
          return -1;
        }
        c = free.ceiling(new long[] {want, -1});
      }
      long addr = c[1];
      free.remove(c);
      long[] meta = chunks.get(addr);
      long size = meta[0];
      if (size >= 2 * want || size - want >= MAX_INTERNAL_FRAGMENTATION) {
        meta[0] = want;
        long rest = addr + want;
        chunks.put(rest, new long[] {size - want, 0, meta[2]});
        free.add(new long[] {size - want, rest});
      }
      meta[1] = 1;
      inUse += meta[0];
      peak = Math.max(peak, inUse);
      if (log != null) {
        long[] at = place(addr);
        requestAt.put(addr, requests++);
        log.accept("A " + bytes + " " + at[0] + " " + at[1] + " " + op);
      }
      return addr;
    }

    private boolean extend(long want) {
      long available = (limit - regions) / MIN_ALLOCATION * MIN_ALLOCATION;
      if (want > available) {
        return false;
      }
      boolean increased = false;
      while (want > nextRegionBytes) {
        nextRegionBytes *= 2;
        increased = true;
      }
      long bytes = Math.min(nextRegionBytes, available);
      if (!increased) {
        nextRegionBytes *= 2;
      }
      // each region below the one before, as the system's mmap places them (the allocator's
      // dumps list them by address: the last grown lowest), so of two free chunks of one size
      // the later region's is taken; a gap between regions: their chunks never coalesce
      nextAddress -= bytes + MIN_ALLOCATION;
      long addr = nextAddress;
      regions += bytes;
      grown.add(new long[] {addr, bytes});
      if (log != null) {
        log.accept("R " + bytes);
      }
      chunks.put(addr, new long[] {bytes, 0, addr});
      free.add(new long[] {bytes, addr});
      return true;
    }

    /**
     * Where the chunk at {@code addr} lies: the index of its region (in the order grown) and its
     * offset there.
     */
    public long[] place(long addr) {
      long region = chunks.get(addr)[2];
      for (int i = 0; i < grown.size(); i++) {
        if (grown.get(i)[0] == region) {
          return new long[] {i, addr - region};
        }
      }
      throw new IllegalArgumentException("no chunk at " + addr);
    }

    /** The regions' sizes, in the order they were grown. */
    public List<Long> regionSizes() {
      return grown.stream().map(r -> r[1]).toList();
    }

    /** Frees the chunk at {@code addr}, coalescing it with free neighbours in its region. */
    public void free(long addr) {
      if (log != null) {
        log.accept("F " + requestAt.remove(addr));
      }
      long[] meta = chunks.get(addr);
      meta[1] = 0;
      inUse -= meta[0];
      long start = addr;
      long size = meta[0];
      Long next = chunks.higherKey(addr);
      if (next != null && next == addr + size) {
        long[] nm = chunks.get(next);
        if (nm[1] == 0 && nm[2] == meta[2]) {
          free.remove(new long[] {nm[0], next});
          chunks.remove(next);
          size += nm[0];
        }
      }
      Long prev = chunks.lowerKey(addr);
      if (prev != null) {
        long[] pm = chunks.get(prev);
        if (pm[1] == 0 && pm[2] == meta[2] && prev + pm[0] == addr) {
          free.remove(new long[] {pm[0], prev});
          chunks.remove(addr);
          start = prev;
          size += pm[0];
          meta = pm;
        }
      }
      meta[0] = size;
      meta[1] = 0;
      free.add(new long[] {size, start});
    }

    Result failed(String op, long bytes) {
      return new Result(false, peak, regions, op, bytes, room < 0 ? regions : room);
    }
  }
}
