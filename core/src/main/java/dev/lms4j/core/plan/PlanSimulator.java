package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.BufferAliases;
import dev.lms4j.core.memory.InPlaceReuse;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.Arrays;

/**
 * The simulated peak of a graph rewritten by a plan, computed on flat arrays without building
 * the rewritten graph: the same levels, the same schedule (level by level, ascending id, inserted
 * ops numbered after the graph's in plan order) and the same reference counting as
 * {@link PlanApplier} followed by {@link MemorySimulator} on the levelled schedule, at a fraction
 * of the cost. The auto-tuner calls it for every candidate; a test checks both give equal peaks.
 */
public final class PlanSimulator {
  private final DataflowGraph g;
  private final int n;
  private final int[] tOff;
  private final int baseTensors;
  private final long[] baseBytes;
  private final boolean[] baseResident;
  private final int[] baseTensorOp;
  private final int[][] baseIn;
  private final int[][] baseCtl;
  private final boolean[] baseShapeOnly;
  private final long[] baseScratch;
  /** Per base tensor, the tensor that owns its buffer through forwarding ops (no reuse). */
  private final int[] baseOwner;
  private final String[] baseDtype;
  /** Per base op, per output, the inputs whose buffer it may take over in place. */
  private final int[][][] baseCandidates;
  private final long pinnedBytes;

  /** Prepares the arrays of {@code g} once; {@link #peak} can then be called many times. */
  public PlanSimulator(DataflowGraph g) {
    this.g = g;
    n = g.size();
    tOff = new int[n + 1];
    for (int v = 0; v < n; v++) {
      tOff[v + 1] = tOff[v] + g.op(v).outputs().size();
    }
    baseTensors = tOff[n];
    baseBytes = new long[baseTensors];
    baseResident = new boolean[baseTensors];
    baseTensorOp = new int[baseTensors];
    baseIn = new int[n][];
    baseCtl = new int[n][];
    baseShapeOnly = new boolean[n];
    baseScratch = new long[n];
    baseOwner = new int[baseTensors];
    baseDtype = new String[baseTensors];
    baseCandidates = new int[n][][];
    TensorId[][] owner = BufferAliases.forwardingOwners(g);
    long pinned = 0;
    for (Op op : g.ops()) {
      int v = op.id();
      boolean pin = MemorySimulator.isPinned(op);
      for (int i = 0; i < op.outputs().size(); i++) {
        Tensor t = op.output(i);
        int ti = tOff[v] + i;
        baseBytes[ti] = t.bytes();
        baseTensorOp[ti] = v;
        baseResident[ti] = pin || t.persistent();
        baseOwner[ti] = tOff[owner[v][i].op()] + owner[v][i].output();
        baseDtype[ti] = String.valueOf(t.dtype());
      }
      int[] in = new int[op.inputs().size()];
      for (int k = 0; k < in.length; k++) {
        TensorId t = op.inputs().get(k);
        in[k] = tOff[t.op()] + t.output();
      }
      pinned += MemorySimulator.residentBytes(g, op);
      baseIn[v] = in;
      baseCandidates[v] = new int[op.outputs().size()][];
      for (int i = 0; i < op.outputs().size(); i++) {
        baseCandidates[v][i] = BufferAliases.inPlaceCandidates(op, i);
      }
      baseCtl[v] = op.controlInputs().stream().mapToInt(Integer::intValue).toArray();
      baseShapeOnly[v] = OpTypes.SHAPE_ONLY.contains(op.type());
      baseScratch[v] = g.scratchBytes(v);
    }
    pinnedBytes = pinned;
  }

  /**
   * The simulated peak of the graph rewritten with {@code plan}.
   *
   * @throws IllegalArgumentException when the plan names unknown ops or makes a cycle
   */
  public long peak(SwapPlan plan) {
    int k = plan.addedOps();
    int total = n + k;
    int tensors = baseTensors + k;
    long[] bytes = Arrays.copyOf(baseBytes, tensors);
    boolean[] resident = Arrays.copyOf(baseResident, tensors);
    int[] tensorOp = Arrays.copyOf(baseTensorOp, tensors);
    String[] dtype = Arrays.copyOf(baseDtype, tensors);
    int[][] in = Arrays.copyOf(baseIn, total);
    int[][] ctl = Arrays.copyOf(baseCtl, total);
    boolean[] copiedIn = new boolean[n];
    boolean[] copiedCtl = new boolean[n];
    int next = n;
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      int prod = g.opOrThrow(so.producer()).id();
      int t = tOff[prod] + so.output();
      int soId = next++;
      int soT = baseTensors + (soId - n);
      in[soId] = new int[] {t};
      ctl[soId] = new int[0];
      tensorOp[soT] = soId;
      bytes[soT] = 0;
      dtype[soT] = dtype[t];
      for (SwapPlan.SwapIn si : so.swapIns()) {
        int siId = next++;
        int siT = baseTensors + (siId - n);
        in[siId] = new int[] {soT};
        int[] trig = new int[si.triggers().size()];
        for (int j = 0; j < trig.length; j++) {
          trig[j] = g.opOrThrow(si.triggers().get(j)).id();
        }
        ctl[siId] = trig;
        tensorOp[siT] = siId;
        bytes[siT] = bytes[t];
        dtype[siT] = dtype[t];
        for (String c : si.consumers()) {
          int cid = g.opOrThrow(c).id();
          if (!copiedIn[cid]) {
            in[cid] = in[cid].clone();
            copiedIn[cid] = true;
          }
          int[] a = in[cid];
          for (int j = 0; j < a.length; j++) {
            if (a[j] == t) {
              a[j] = siT;
            }
          }
        }
      }
      for (String c : so.syncConsumers()) {
        addControl(ctl, copiedCtl, g.opOrThrow(c).id(), soId);
      }
    }
    for (SwapPlan.ControlEdge e : plan.controlEdges()) {
      addControl(ctl, copiedCtl, g.opOrThrow(e.to()).id(), g.opOrThrow(e.from()).id());
    }
    int[] level = levels(total, in, ctl, tensorOp);
    int[] order = schedule(level);
    return simulate(total, order, in, bytes, resident, dtype);
  }

  private static final int[][] NO_CANDIDATES = {new int[0]};

  private static void addControl(int[][] ctl, boolean[] copied, int to, int from) {
    for (int c : ctl[to]) {
      if (c == from) {
        return;
      }
    }
    int[] a = Arrays.copyOf(ctl[to], ctl[to].length + 1);
    a[a.length - 1] = from;
    ctl[to] = a;
    if (to < copied.length) {
      copied[to] = true;
    }
  }

  private static int[] levels(int total, int[][] in, int[][] ctl, int[] tensorOp) {
    int[] indeg = new int[total];
    int[] succCount = new int[total];
    for (int v = 0; v < total; v++) {
      for (int t : in[v]) {
        succCount[tensorOp[t]]++;
      }
      for (int c : ctl[v]) {
        succCount[c]++;
      }
      indeg[v] = in[v].length + ctl[v].length;
    }
    int[] start = new int[total + 1];
    for (int v = 0; v < total; v++) {
      start[v + 1] = start[v] + succCount[v];
    }
    int[] succ = new int[start[total]];
    int[] fill = Arrays.copyOf(start, total);
    for (int v = 0; v < total; v++) {
      for (int t : in[v]) {
        succ[fill[tensorOp[t]]++] = v;
      }
      for (int c : ctl[v]) {
        succ[fill[c]++] = v;
      }
    }
    int[] level = new int[total];
    int[] queue = new int[total];
    int head = 0;
    int tail = 0;
    for (int v = 0; v < total; v++) {
      if (indeg[v] == 0) {
        queue[tail++] = v;
      }
    }
    while (head < tail) {
      int v = queue[head++];
      for (int j = start[v]; j < start[v + 1]; j++) {
        int s = succ[j];
        level[s] = Math.max(level[s], level[v] + 1);
        if (--indeg[s] == 0) {
          queue[tail++] = s;
        }
      }
    }
    if (tail != total) {
      throw new IllegalArgumentException("the plan makes a cycle");
    }
    return level;
  }

  private static int[] schedule(int[] level) {
    int max = 0;
    for (int l : level) {
      max = Math.max(max, l);
    }
    int[] count = new int[max + 2];
    for (int l : level) {
      count[l + 1]++;
    }
    for (int l = 0; l <= max; l++) {
      count[l + 1] += count[l];
    }
    int[] order = new int[level.length];
    for (int v = 0; v < level.length; v++) {
      order[count[level[v]]++] = v;
    }
    return order;
  }

  private long simulate(int total, int[] order, int[][] in, long[] bytes, boolean[] resident,
      String[] dtype) {
    int tensors = bytes.length;
    int[] owner = new int[tensors];
    int[] refs = new int[tensors];
    for (int t = 0; t < tensors; t++) {
      owner[t] = t < baseTensors ? baseOwner[t] : t;
      refs[t] = resident[t] ? -1 : owner[t] != t ? -2 : 0;
    }
    for (int v = 0; v < total; v++) {
      if (v < n && baseShapeOnly[v]) {
        continue;
      }
      for (int t : in[v]) {
        int o = owner[t];
        if (refs[o] >= 0) {
          refs[o]++;
        }
      }
    }
    // a fetched tensor is held until the step ends (DataflowGraph#fetched)
    for (TensorId f : g.fetched()) {
      int o = owner[tOff[f.op()] + f.output()];
      if (refs[o] >= 0) {
        refs[o]++;
      }
    }
    if (g.inPlaceReuse()) {
      // the only reader of a buffer takes it over in place, decided after swaps rewired reads
      int[] firstOut = new int[total];
      int[][][] cand = new int[total][][];
      boolean[] shapeOnly = new boolean[total];
      for (int v = 0; v < total; v++) {
        firstOut[v] = v < n ? tOff[v] : baseTensors + (v - n);
        cand[v] = v < n ? baseCandidates[v] : NO_CANDIDATES;
        shapeOnly[v] = v < n && baseShapeOnly[v];
      }
      InPlaceReuse.apply(new InPlaceReuse.Step(in, firstOut, cand, shapeOnly, bytes, dtype),
          order, owner, refs);
    }
    long live = pinnedBytes;
    long peak = pinnedBytes;
    for (int v : order) {
      int from = v < n ? tOff[v] : baseTensors + (v - n);
      int to = v < n ? tOff[v + 1] : from + 1;
      for (int t = from; t < to; t++) {
        if (refs[t] >= 0) {
          live += bytes[t];
        }
      }
      // the kernel's scratch while it runs (inserted swap ops have none)
      peak = Math.max(peak, live + (v < n ? baseScratch[v] : 0));
      if (v >= n || !baseShapeOnly[v]) {
        for (int t : in[v]) {
          int o = owner[t];
          if (refs[o] > 0 && --refs[o] == 0) {
            live -= bytes[o];
          }
        }
      }
      for (int t = from; t < to; t++) {
        if (refs[t] == 0) {
          live -= bytes[t];
        }
      }
    }
    return peak;
  }
}
