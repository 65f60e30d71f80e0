package dev.lms4j.core.graph;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * An immutable dataflow graph: ops with typed, sized outputs, data edges and control edges.
 *
 * <p>Build one with {@link #builder()}; inputs are named as TensorFlow names them
 * ({@code "conv1"}, {@code "conv1:1"}, control inputs as {@code "^init"}) and may refer to ops
 * added later. {@link DataflowGraphBuilder#build()} rejects dangling names and cycles.
 *
 * <pre>{@code
 * DataflowGraph g = DataflowGraph.builder()
 *     .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(4096))
 *     .op("relu", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(4096))
 *     .build();
 * }</pre>
 */
public final class DataflowGraph {
  private final List<Op> ops;
  private final Map<String, Integer> byName;
  /** consumers[op][output] = ids of ops reading that output via a data edge (with repeats). */
  private final int[][][] consumers;
  private final int[][] controlSuccessors;
  private final int[][] preds;
  private final int[][] succs;
  private final int[] topoOrder;
  /** Effective scratch per op (measured, else estimated), computed on first use. */
  private volatile long[] scratchBytes;
  /** Values derived from this graph alone ({@link #derived}), by key. */
  private final java.util.concurrent.ConcurrentHashMap<Object, Object> derived =
      new java.util.concurrent.ConcurrentHashMap<>();
  private final boolean inPlaceReuse;
  private final boolean hostFeeds;
  private final java.util.Set<TensorId> fetched;
  /** What grappler's shape inference knows; null where not known. */
  private final GrapplerShapes grapplerShapes;
  /** Residents whose buffer init shares with a held constant ({@link #initShared()}). */
  private final java.util.Set<String> initShared;

  DataflowGraph(List<Op> ops, Map<String, Integer> byName, boolean inPlaceReuse,
      boolean hostFeeds, java.util.Set<TensorId> fetched, GrapplerShapes grapplerShapes,
      java.util.Set<String> initShared) {
    this.inPlaceReuse = inPlaceReuse;
    this.hostFeeds = hostFeeds;
    this.fetched = java.util.Set.copyOf(fetched);
    this.grapplerShapes = grapplerShapes;
    this.initShared = java.util.Set.copyOf(initShared);
    this.ops = Collections.unmodifiableList(ops);
    this.byName = Collections.unmodifiableMap(byName);
    int n = ops.size();
    consumers = new int[n][][];
    controlSuccessors = new int[n][];
    int[] ctlCount = new int[n];
    for (int i = 0; i < n; i++) {
      consumers[i] = new int[ops.get(i).outputs().size()][];
    }
    int[][] consCount = new int[n][];
    for (int i = 0; i < n; i++) {
      consCount[i] = new int[consumers[i].length];
    }
    for (Op op : ops) {
      for (TensorId in : op.inputs()) {
        consCount[in.op()][in.output()]++;
      }
      for (int c : op.controlInputs()) {
        ctlCount[c]++;
      }
    }
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < consumers[i].length; j++) {
        consumers[i][j] = new int[consCount[i][j]];
        consCount[i][j] = 0;
      }
      controlSuccessors[i] = new int[ctlCount[i]];
      ctlCount[i] = 0;
    }
    for (Op op : ops) {
      for (TensorId in : op.inputs()) {
        consumers[in.op()][in.output()][consCount[in.op()][in.output()]++] = op.id();
      }
      for (int c : op.controlInputs()) {
        controlSuccessors[c][ctlCount[c]++] = op.id();
      }
    }
    preds = new int[n][];
    succs = new int[n][];
    int[] mark = new int[n];
    java.util.Arrays.fill(mark, -1);
    for (int i = 0; i < n; i++) {
      Op o = ops.get(i);
      int[] p = new int[o.inputs().size() + o.controlInputs().size()];
      int k = 0;
      for (TensorId t : o.inputs()) {
        k = addOnce(p, k, t.op(), mark, i);
      }
      for (int c : o.controlInputs()) {
        k = addOnce(p, k, c, mark, i);
      }
      preds[i] = sortedPrefix(p, k);
    }
    java.util.Arrays.fill(mark, -1);
    for (int i = 0; i < n; i++) {
      int[] all = concatConsumers(i);
      int k = 0;
      for (int s : all) {
        k = addOnce(all, k, s, mark, i);
      }
      succs[i] = sortedPrefix(all, k);
    }
    topoOrder = computeTopoOrder();
  }

  /** A new builder. */
  public static DataflowGraphBuilder builder() {
    return new DataflowGraphBuilder();
  }

  /** All ops, indexed by id. */
  public List<Op> ops() {
    return ops;
  }

  /** Number of ops. */
  public int size() {
    return ops.size();
  }

  /** The op with this id. */
  public Op op(int id) {
    return ops.get(id);
  }

  /** The op with this name, if any. */
  public Optional<Op> op(String name) {
    Integer id = byName.get(name);
    return id == null ? Optional.empty() : Optional.of(ops.get(id));
  }

  /** The op with this name; throws {@link IllegalArgumentException} naming it when absent. */
  public Op opOrThrow(String name) {
    return op(name).orElseThrow(() -> new IllegalArgumentException("no op named '" + name + "'"));
  }

  /** The tensor behind an id. */
  public Tensor tensor(TensorId t) {
    return ops.get(t.op()).output(t.output());
  }

  /** TensorFlow-style name of a tensor: {@code op:index}. */
  public String tensorName(TensorId t) {
    return ops.get(t.op()).name() + ":" + t.output();
  }

  /** Ids of the ops that read this tensor through data edges (an op reading it twice appears twice). */
  public int[] consumers(TensorId t) {
    return consumers[t.op()][t.output()].clone();
  }

  /** Number of data-edge reads of this tensor. */
  public int consumerCount(TensorId t) {
    return consumers[t.op()][t.output()].length;
  }

  /** Ids of the ops that have a control edge from this op. */
  public int[] controlSuccessors(int op) {
    return controlSuccessors[op].clone();
  }

  /** Number of data edges plus control edges. */
  public int edgeCount() {
    int e = 0;
    for (Op op : ops) {
      e += op.inputs().size() + op.controlInputs().size();
    }
    return e;
  }

  /** Ids of all successors (data and control), deduplicated, ascending. */
  public int[] successors(int op) {
    return succs[op].clone();
  }

  /** Ids of all predecessors (data and control), deduplicated, ascending. */
  public int[] predecessors(int op) {
    return preds[op].clone();
  }

  /** Number of distinct predecessors. */
  public int predecessorCount(int op) {
    return preds[op].length;
  }

  /** The {@code i}-th distinct predecessor (ascending id), without copying. */
  public int predecessor(int op, int i) {
    return preds[op][i];
  }

  private static int addOnce(int[] dst, int k, int v, int[] mark, int stamp) {
    if (mark[v] != stamp) {
      mark[v] = stamp;
      dst[k++] = v;
    }
    return k;
  }

  private static int[] sortedPrefix(int[] a, int k) {
    int[] r = Arrays.copyOf(a, k);
    Arrays.sort(r);
    return r;
  }

  /** A topological order (Kahn's algorithm, smallest id first among ready ops). */
  public int[] topologicalOrder() {
    return topoOrder.clone();
  }

  /** Sum of the bytes of the variables (outputs of {@link OpTypes#VARIABLES} ops). */
  public long persistentBytes() {
    long b = 0;
    for (Op op : ops) {
      if (OpTypes.VARIABLES.contains(op.type())) {
        for (Tensor t : op.outputs()) {
          b += t.bytes();
        }
      }
    }
    return b;
  }

  /**
   * Ops TensorFlow's constant folding turns into constants: constants, shape-only ops, and ops
   * computed from those only. Swapping or ordering them is pointless: grappler folds them away.
   * Indexed by op id.
   */
  public boolean[] constantFoldable() {
    boolean[] f = new boolean[ops.size()];
    for (int v : topoOrder) {
      Op op = ops.get(v);
      if (OpTypes.CONSTANTS.contains(op.type()) || OpTypes.SHAPE_ONLY.contains(op.type())) {
        f[v] = true;
        continue;
      }
      if (op.inputs().isEmpty() || OpTypes.isRandomOrStateful(op.type())
          || OpTypes.isResident(op.type()) || op.name().startsWith(OpTypes.LMS_PREFIX)) {
        continue;
      }
      boolean all = true;
      for (TensorId in : op.inputs()) {
        all &= f[in.op()];
      }
      f[v] = all;
    }
    return f;
  }

  /** True when the graph holds ops inserted by lms4j (name prefix {@link OpTypes#LMS_PREFIX}). */
  public boolean isRewritten() {
    for (Op op : ops) {
      if (op.name().startsWith(OpTypes.LMS_PREFIX)) {
        return true;
      }
    }
    return false;
  }

  /**
   * A new graph with some ops replaced (same id and name, other inputs or control inputs) and
   * new ops appended (ids {@code size()}, {@code size()+1}, ... in order). Cheaper than a builder:
   * nothing is resolved by name. Cycles and duplicate names are rejected.
   */
  public DataflowGraph withEdits(Map<Integer, Op> replaced, List<Op> added) {
    return GraphEdits.apply(ops, byName, replaced, added, inPlaceReuse, hostFeeds, fetched,
        grapplerShapes, initShared);
  }

  /**
   * True when fed tensors ({@code Placeholder}s) live outside the device's memory: a graph run
   * on TensorFlow's CPU device reads the tensors the caller allocated (the C API's allocator,
   * not the budgeted BFC allocator of the device), so a feed costs the budget nothing; on a GPU
   * they are copied in and count. Graphs imported from TensorFlow without a GPU placement set
   * it ({@link DataflowGraphBuilder#hostFeeds}); kept by every edit of the graph.
   */
  public boolean hostFeeds() {
    return hostFeeds;
  }

  /**
   * The tensors a step fetches (the loss, metrics): the session holds each until the step ends,
   * so its buffer stays allocated after its last reader, and no reader takes it over in place
   * (its reference count never falls to one). Traced on the corpus mlp-mixed
   * ({@code LMS4J_BFC_LOG}): the 4-byte {@code loss} kept its chunk through the whole step, and
   * the loss scaling's {@code Mul} of it allocated its own. Kept by every edit of the graph;
   * {@link DataflowGraphBuilder#fetch} sets them.
   */
  public java.util.Set<TensorId> fetched() {
    return fetched;
  }

  /**
   * The shape reads ({@code Shape}, {@code ShapeN}, {@code Size}, {@code Rank},
   * {@code ZerosLike}, {@code OnesLike}, by op name) whose input's shape grappler cannot infer
   * before the step, so its constant folding leaves them to run in it; null where the graph does
   * not say (a graph not imported from TensorFlow). Grappler takes a fed tensor's shape as
   * unknown and infers on from there: a shape a {@code Reshape} to a constant shape fixes is
   * known again, one that carries the fed batch dimension is not. Measured with TensorFlow's
   * allocator log: in the corpus encoder (activations reshaped to [batch * length, width]) the
   * layer norms' gradient divisors were folded; in the einsum encoder ([batch, length, width]
   * from the fed ids) they ran in the step. Not followed: grappler also merges dimensions it can
   * prove equal (a concat of a fed tensor's descendant with a tensor of known shape), so it
   * knows some shapes per-op inference does not (on the corpus U-Net, 19 of the 29 reads named
   * here were folded). Kept by every edit of the graph.
   */
  public java.util.Set<String> dynamicShapeReads() {
    return grapplerShapes == null ? null : grapplerShapes.dynamicShapeReads();
  }

  /** What grappler's shape inference knows of this graph's tensors; null where not known. */
  public GrapplerShapes grapplerShapes() {
    return grapplerShapes;
  }

  /**
   * The residents (by op name) whose initial value is a constant TensorFlow holds for the
   * session ({@code BfcReplay.HELD}) and that init gives that constant's buffer instead of one of
   * their own: a resource variable assigned from it ({@code AssignVariableOp} adopts the value's
   * buffer). Its first in-place update in the first step copies the buffer into one of its own
   * (the update sees the buffer shared). Empty where the graph does not say.
   */
  public java.util.Set<String> initShared() {
    return initShared;
  }

  /**
   * False where grappler's shape inference does not fully know {@code t}'s shape
   * ({@link GrapplerShapes#unknownShape()}); true where it does or the graph does not say.
   */
  public boolean shapeKnownToGrappler(TensorId t) {
    return grapplerShapes == null || !grapplerShapes.unknownShape().contains(tensorName(t));
  }

  /**
   * By op id: true for an op whose value depends, through data edges, on a shape grappler cannot
   * infer before the step ({@link #dynamicShapeReads()}), or where the graph does not say, on a
   * feed (the shape reads of what a feed leads to counted as such). Such an op is not a constant
   * to grappler even where {@link #constantFoldable()} says it is computed from shapes alone.
   */
  public boolean[] shapeDynamic() {
    boolean[] dyn = new boolean[ops.size()];
    for (int v : topoOrder) {
      Op op = ops.get(v);
      if (grapplerShapes == null ? OpTypes.FEEDS.contains(op.type())
          : grapplerShapes.dynamicShapeReads().contains(op.name())) {
        dyn[v] = true;
        continue;
      }
      for (TensorId in : op.inputs()) {
        if (dyn[in.op()]) {
          dyn[v] = true;
          break;
        }
      }
    }
    return dyn;
  }

  /**
   * True when the graph's kernels reuse input buffers as TensorFlow's do: an op that is the only
   * reader of a buffer its kernel may take over in place ({@code Relu}, {@code Mul},
   * {@code Softmax}, ...) writes its output there ({@code dev.lms4j.core.memory.InPlaceReuse}),
   * and the memory model counts no new buffer for it. Graphs imported from TensorFlow set it;
   * synthetic graphs built in tests count every output as a buffer of its own unless they ask
   * ({@link DataflowGraphBuilder#inPlaceReuse}). Kept by every edit of the graph.
   */
  public boolean inPlaceReuse() {
    return inPlaceReuse;
  }

  /**
   * A value computed from this graph alone, once: the graph never changes, so {@code compute}
   * runs on first use and its result is kept with the graph (e.g. which tensor owns each
   * buffer, which every simulation of the graph asks for). The value is shared by all callers,
   * who must not modify it.
   *
   * @param key     identifies the value (a constant of the class that computes it)
   * @param compute computes it from this graph
   */
  @SuppressWarnings("unchecked")
  public <T> T derived(Object key, java.util.function.Function<DataflowGraph, T> compute) {
    Object v = derived.get(key);
    if (v == null) {
      // not computeIfAbsent: compute may ask for other derived values of this graph
      v = compute.apply(this);
      Object before = derived.putIfAbsent(key, v);
      if (before != null) {
        v = before;
      }
    }
    return (T) v;
  }

  /**
   * The bytes op {@code op}'s kernel allocates while it runs beyond its outputs (oneDNN's
   * workspace and reorders, temporaries): the measured {@link Op#scratch()} when there is one,
   * else {@link ScratchEstimates#estimate}'s figure from the op's type and shapes. The memory
   * simulator adds it to the bytes in use while the op runs.
   */
  public long scratchBytes(int op) {
    long[] s = scratchBytes;
    if (s == null) {
      s = new long[ops.size()];
      for (Op o : ops) {
        s[o.id()] = o.scratch() != Op.SCRATCH_UNKNOWN ? o.scratch()
            : ScratchEstimates.estimate(this, o);
      }
      scratchBytes = s;
    }
    return s[op];
  }

  /**
   * This graph with measured kernel scratch: each op named in {@code byOpName} gets that many
   * bytes as its {@link Op#scratch()} (0 is a measurement too: it replaces the estimate). Names
   * the graph lacks are ignored (a trace also names ops TensorFlow added, such as
   * {@code _SOURCE}, or folded constants). Ops not named keep what they had. A probe that traced
   * a step passes what it read ({@code ScratchTrace.scratchByOp()} in the tensorflow module):
   *
   * <pre>{@code
   * DataflowGraph measured = graph.withScratch(Map.of("gradients/Conv2DBackpropFilter", 28L << 20));
   * long peak = MemorySimulator.simulate(measured, Levels.of(measured).schedule()).peakBytes();
   * }</pre>
   *
   * <p>The scratch stays with an op through every rewrite of the planners: an op replaced with
   * other edges keeps it, a recomputed clone gets its original's.
   *
   * @throws IllegalArgumentException when a value is negative
   */
  public DataflowGraph withScratch(Map<String, Long> byOpName) {
    return GraphEdits.withScratch(this, byName, byOpName);
  }

  /**
   * This graph with every op's scratch measured as 0: the memory model before scratch was
   * modelled (live tensors only), for comparisons.
   */
  public DataflowGraph withoutScratch() {
    Map<Integer, Op> replaced = new HashMap<>();
    for (Op o : ops) {
      replaced.put(o.id(), o.withScratch(0));
    }
    return withEdits(replaced, List.of());
  }

  /** A builder that copies this graph's ops, to which ops and edges can be added. */
  public DataflowGraphBuilder toBuilder() {
    DataflowGraphBuilder b = new DataflowGraphBuilder().inPlaceReuse(inPlaceReuse)
        .hostFeeds(hostFeeds).grapplerShapes(grapplerShapes).initShared(initShared);
    for (TensorId t : fetched) {
      b.fetch(tensorName(t));
    }
    for (Op op : ops) {
      List<String> ins = new ArrayList<>();
      for (TensorId t : op.inputs()) {
        ins.add(tensorName(t));
      }
      for (int c : op.controlInputs()) {
        ins.add("^" + ops.get(c).name());
      }
      b.op(op.name(), op.type(), op.category(), op.device(), ins, op.outputs());
      if (op.scratch() != Op.SCRATCH_UNKNOWN) {
        b.scratch(op.name(), op.scratch());
      }
    }
    return b;
  }

  private int[] concatConsumers(int op) {
    int n = controlSuccessors[op].length;
    for (int[] c : consumers[op]) {
      n += c.length;
    }
    int[] all = new int[n];
    int k = 0;
    for (int[] c : consumers[op]) {
      System.arraycopy(c, 0, all, k, c.length);
      k += c.length;
    }
    System.arraycopy(controlSuccessors[op], 0, all, k, controlSuccessors[op].length);
    return all;
  }

  /**
   * {@code topologicalOrder(Comparator.naturalOrder())}, with the ready ops on a heap of plain
   * ints: every graph a planner simulates is built with it (thousands per plan).
   */
  private int[] computeTopoOrder() {
    return kahn(new IdHeap(ops.size()));
  }

  /**
   * A topological order (Kahn's algorithm) taking, among the ready ops, the first by
   * {@code first} (ties must be broken by it: give a total order, e.g. ending with the id).
   *
   * @throws IllegalArgumentException when the graph has a cycle
   */
  public int[] topologicalOrder(Comparator<Integer> first) {
    java.util.PriorityQueue<Integer> q = new java.util.PriorityQueue<>(first);
    return kahn(new Ready() {
      @Override
      public void add(int v) {
        q.add(v);
      }

      @Override
      public int poll() {
        return q.poll();
      }

      @Override
      public boolean isEmpty() {
        return q.isEmpty();
      }
    });
  }

  /** The ops ready to run, in the order {@link #kahn} takes them. */
  private interface Ready {
    void add(int v);

    int poll();

    boolean isEmpty();
  }

  /** Ready op ids, the smallest first: a binary min-heap of plain ints. */
  private static final class IdHeap implements Ready {
    private final int[] heap;
    private int size;

    IdHeap(int capacity) {
      heap = new int[capacity];
    }

    @Override
    public void add(int v) {
      int j = size++;
      while (j > 0 && heap[(j - 1) / 2] > v) {
        heap[j] = heap[(j - 1) / 2];
        j = (j - 1) / 2;
      }
      heap[j] = v;
    }

    @Override
    public int poll() {
      int top = heap[0];
      int last = heap[--size];
      int i = 0;
      while (true) {
        int c = 2 * i + 1;
        if (c >= size) {
          break;
        }
        if (c + 1 < size && heap[c + 1] < heap[c]) {
          c++;
        }
        if (heap[c] >= last) {
          break;
        }
        heap[i] = heap[c];
        i = c;
      }
      if (size > 0) {
        heap[i] = last;
      }
      return top;
    }

    @Override
    public boolean isEmpty() {
      return size == 0;
    }
  }

  /** Kahn's algorithm, taking the ready ops in {@code ready}'s order. */
  private int[] kahn(Ready ready) {
    int n = ops.size();
    int[] indeg = new int[n];
    for (int i = 0; i < n; i++) {
      indeg[i] = preds[i].length;
      if (indeg[i] == 0) {
        ready.add(i);
      }
    }
    int[] order = new int[n];
    int k = 0;
    while (!ready.isEmpty()) {
      int v = ready.poll();
      order[k++] = v;
      for (int s : succs[v]) {
        if (--indeg[s] == 0) {
          ready.add(s);
        }
      }
    }
    if (k != n) {
      List<String> stuck = new ArrayList<>();
      for (int i = 0; i < n && stuck.size() < 5; i++) {
        if (indeg[i] > 0) {
          stuck.add(ops.get(i).name());
        }
      }
      throw new IllegalArgumentException("graph has a cycle through " + stuck);
    }
    return order;
  }
}
