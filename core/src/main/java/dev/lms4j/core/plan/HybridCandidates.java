package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.HybridCandidate.Kind;
import dev.lms4j.core.plan.HybridCandidate.Option;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Candidate discovery of {@link HybridPlanner}: the forward tensors the backward pass reads
 * after their last forward use, each with its options priced by the cost model on the levelled
 * schedule; and, for swapping only, any other tensor across the longest stretch of the schedule
 * in which nothing reads it (a U-Net's skip tensor, a gradient read again much later). What may
 * be swapped or recomputed comes from the {@link TensorPolicy} only: a swap needs
 * {@link TensorPolicy#maySwap} for the tensor, and only backward readers that
 * {@link TensorPolicy#maySwapInto may read a swap-in} are re-pointed; a reader that may not
 * keeps the original alive until it runs, like a forward reader, so the swap-in serves only the
 * readers after it. A recomputation needs {@link TensorPolicy#mayRecompute} for the producer
 * (and the {@link Fusions} guards, a separate correctness rule).
 */
final class HybridCandidates {
  /** Ancestors of a backward reader searched for a swap-in trigger. */
  private static final int TRIGGER_SEARCH = 256;
  /** Schedule positions a tensor must go unread for to be swapped across the gap. */
  static final int MIN_GAP = 4;

  private final DataflowGraph g;
  private final HybridPlanner.Options o;
  private final TensorPolicy policy;
  /** Schedule positions of the ops (levelled schedule). */
  private final int[] pos;
  private final double[] start;
  private final double[] end;

  private HybridCandidates(DataflowGraph g, HybridPlanner.Options o, TensorPolicy policy) {
    this.g = g;
    this.o = o;
    this.policy = policy;
    int[] order = Levels.of(g).schedule();
    pos = new int[g.size()];
    for (int i = 0; i < order.length; i++) {
      pos[order[i]] = i;
    }
    start = new double[g.size()];
    end = new double[g.size()];
    double t = 0;
    for (int v : order) {
      start[v] = t;
      t += o.costModel().opUs(g, g.op(v));
      end[v] = t;
    }
  }

  /**
   * The schedule positions of {@code g}'s ops and its candidates, in op and output order.
   *
   * @param pos receives the schedule position of each op (length {@code g.size()})
   */
  static List<HybridCandidate> find(DataflowGraph g, HybridPlanner.Options o, TensorPolicy policy,
      int[] pos) {
    HybridCandidates d = new HybridCandidates(g, o, policy);
    System.arraycopy(d.pos, 0, pos, 0, pos.length);
    return d.find();
  }

  private List<HybridCandidate> find() {
    List<HybridCandidate> out = new ArrayList<>();
    boolean[] foldable = g.constantFoldable();
    for (Op prod : g.ops()) {
      if (MemorySimulator.isPinned(prod) || foldable[prod.id()]
          || prod.name().startsWith(OpTypes.LMS_PREFIX)) {
        continue;
      }
      for (int i = 0; i < prod.outputs().size(); i++) {
        HybridCandidate c = candidate(prod, i);
        if (c != null) {
          out.add(c);
        }
      }
    }
    return out;
  }

  private HybridCandidate candidate(Op prod, int output) {
    Tensor tensor = prod.output(output);
    if (tensor.persistent() || tensor.bytes() == 0) {
      return null;
    }
    TensorId tid = new TensorId(prod.id(), output);
    int lastForward = pos[prod.id()];
    List<Integer> backward = new ArrayList<>();
    int first = -1;
    for (int c : Arrays.stream(g.consumers(tid)).distinct().sorted().toArray()) {
      Op co = g.op(c);
      if (OpTypes.SHAPE_ONLY.contains(co.type())) {
        continue;
      }
      if (co.category() == OpCategory.FORWARD) {
        lastForward = Math.max(lastForward, pos[c]);
      } else {
        backward.add(c);
        if (first < 0 || pos[c] < pos[first]) {
          first = c;
        }
      }
    }
    if (first < 0 || pos[first] <= lastForward
        || backward.stream().anyMatch(c -> OpTypes.orderSensitive(g.op(c)))) {
      // (an n-ary sum reading it must keep reading the original: OpTypes.orderSensitive)
      return acrossGap(prod, tid, tensor);
    }
    HybridCandidate cand = new HybridCandidate(tid, tensor, backward, first);
    if (o.swap() && !Fusions.intermediate(g, tid) && policy.maySwap(g, tid)) {
      Option sw = swapOption(cand, lastForward, false);
      if (sw != null) {
        cand.options.add(sw);
      }
    }
    if (o.recompute() && policy.mayRecompute(prod) && !Fusions.unsafeToRecompute(g, prod)) {
      List<String> trig = recomputeTriggers(first, prod.id());
      if (!trig.isEmpty()) {
        cand.options.add(new Option(Kind.RECOMPUTE, o.costModel().opUs(g, prod), trig,
            backward));
      }
    }
    if (cand.options.isEmpty()) {
      return null;
    }
    cand.options.sort(Comparator.comparingDouble(Option::costUs).thenComparing(Option::kind));
    return cand;
  }

  /**
   * A tensor that is not a forward tensor the backward pass reads after its last forward use
   * (a U-Net's skip tensor, read again by the decoder; a gradient or a running gradient sum read
   * again much later in the backward pass) may still be swapped across the longest stretch of
   * the schedule in which nothing reads it, as TFLMS swaps any tensor whose next reader is far:
   * the readers before that stretch read the original, the ones after it one swap-in. Swap
   * only (recomputation stays the backward pass's); at least {@link #MIN_GAP} ops apart.
   */
  private HybridCandidate acrossGap(Op prod, TensorId tid, Tensor tensor) {
    if (!o.swap() || Fusions.intermediate(g, tid) || !policy.maySwap(g, tid)) {
      return null;
    }
    int[] readers = Arrays.stream(g.consumers(tid)).distinct()
        .filter(c -> !OpTypes.SHAPE_ONLY.contains(g.op(c).type()))
        .boxed().sorted(Comparator.comparingInt(c -> pos[c])).mapToInt(Integer::intValue)
        .toArray();
    // the longest stretch between two uses (the producer or a reader) with no use in it
    int gapEnd = -1;
    int gapStart = -1;
    int widest = 0;
    int prev = pos[prod.id()];
    for (int i = 0; i < readers.length; i++) {
      int p = pos[readers[i]];
      if (p - prev > widest) {
        widest = p - prev;
        gapEnd = i;
        gapStart = prev;
      }
      prev = Math.max(prev, p);
    }
    if (gapEnd < 0 || widest < MIN_GAP) {
      return null;
    }
    List<Integer> after = new ArrayList<>();
    for (int i = gapEnd; i < readers.length; i++) {
      if (OpTypes.orderSensitive(g.op(readers[i]))) {
        return null;
      }
      after.add(readers[i]);
    }
    after.sort(null);
    HybridCandidate cand = new HybridCandidate(tid, tensor, after, readers[gapEnd]);
    Option sw = swapOption(cand, gapStart, true);
    if (sw == null) {
      return null;
    }
    cand.options.add(sw);
    return cand;
  }

  /**
   * The swap option: the swap-in serves the backward readers that may read it and come after
   * every reader of the original (forward readers, and backward readers the policy keeps on the
   * original); its trigger is a backward ancestor of the first of them, scheduled after that last
   * use of the original; with overlap the latest one whose compute up to the reader hides the
   * swap-in, else (or when none hides it) the reader's nearest such ancestor.
   */
  private Option swapOption(HybridCandidate c, int lastForward, boolean anyCategory) {
    int lastUse = lastForward;
    for (int u : c.backward) {
      if (!policy.maySwapInto(g.op(u))) {
        lastUse = Math.max(lastUse, pos[u]);
      }
    }
    List<Integer> readers = new ArrayList<>();
    int reader = -1;
    for (int u : c.backward) {
      if (pos[u] > lastUse && policy.maySwapInto(g.op(u))) {
        readers.add(u);
        if (reader < 0 || pos[u] < pos[reader]) {
          reader = u;
        }
      }
    }
    if (reader < 0) {
      return null;
    }
    CostModel cm = o.costModel();
    double x = cm.transferUs(c.tensor.bytes(), o.tier());
    int producer = c.tid.op();
    ArrayDeque<Integer> queue = new ArrayDeque<>();
    Set<Integer> seen = new LinkedHashSet<>();
    queue.add(reader);
    seen.add(reader);
    int nearest = -1;
    int hiding = -1;
    while (!queue.isEmpty() && seen.size() < TRIGGER_SEARCH) {
      int v = queue.poll();
      for (int p : g.predecessors(v)) {
        Op po = g.op(p);
        if (p == producer || MemorySimulator.isPinned(po) || !seen.add(p)
            || (!anyCategory && po.category() == OpCategory.FORWARD) || pos[p] <= lastUse) {
          continue;
        }
        queue.add(p);
        if (nearest < 0 || pos[p] > pos[nearest]) {
          nearest = p;
        }
        if (start[reader] - end[p] >= x && (hiding < 0 || pos[p] > pos[hiding])) {
          hiding = p;
        }
      }
    }
    if (nearest < 0) {
      return null;
    }
    int trig = cm.overlap() && hiding >= 0 ? hiding : nearest;
    double cost;
    if (cm.overlap()) {
      double outWindow = Math.max(0, end[trig] - end[producer]);
      double inWindow = Math.max(0, start[reader] - end[trig]);
      cost = Math.max(0, x - outWindow) + Math.max(0, x - inWindow);
    } else {
      cost = 2 * x;
    }
    return new Option(Kind.SWAP, cost, List.of(g.op(trig).name()), readers);
  }

  /** Backward (else any) non-resident inputs of the first backward reader but the producer. */
  private List<String> recomputeTriggers(int reader, int producer) {
    List<String> backward = new ArrayList<>();
    List<String> any = new ArrayList<>();
    for (int p : g.predecessors(reader)) {
      Op po = g.op(p);
      if (p == producer || MemorySimulator.isPinned(po)) {
        continue;
      }
      any.add(po.name());
      if (po.category() != OpCategory.FORWARD) {
        backward.add(po.name());
      }
    }
    return backward.isEmpty() ? any : backward;
  }
}
