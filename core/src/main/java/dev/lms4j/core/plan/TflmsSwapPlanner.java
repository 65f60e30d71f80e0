package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.graph.Levels;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * TFLMS's swap planner (IBM TFLMS v2 semantics) over the graph model.
 *
 * <p>Every edge from a producer to a consumer more than {@code swapout_threshold} levels later is
 * cut: the tensor goes out through one swap-out right after the producer, and comes back through
 * one swap-in per group of consumers ({@code swapin_groupby}), triggered by a control edge from an
 * op {@code swapin_ahead} levels (at most 10 more) before the group's first consumer that leads
 * to it. {@code sync_mode} 1 makes the producer's near consumers wait for the swap-out;
 * {@code sync_mode} 2 triggers each swap-in from its consumer's other inputs instead (no
 * prefetch). Serialization chains the ops of chosen levels before anything else is decided.
 *
 * <p>The three main parameters must be set ({@code >= 0}); {@link SwapAutoTuner} fills them in.
 */
public final class TflmsSwapPlanner {
  private static final Logger LOG = LoggerFactory.getLogger(TflmsSwapPlanner.class);

  /** Types TFLMS never swaps from or into, besides {@link SwapParams#BUILTIN_EXCLUDED_TYPES}. */
  private static final Set<String> NEVER = Set.of("Assign", "AssignAdd", "AssignSub", "Queue",
      "ScatterAdd", "ScatterSub", "ScatterUpdate", "TruncatedNormal", "Read", "VarIsInitializedOp",
      "VariableShape", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
      "ResourceGather", "Range", "RandomUniform", "Placeholder", OpTypes.SWAP_IN,
      OpTypes.SWAP_OUT);

  /** Dtypes never swapped: they are not plain buffers. */

  /** How many levels before the {@code swapin_ahead} bound the trigger search may look. */
  private static final int TRIGGER_SEARCH_LEVELS = 10;

  private TflmsSwapPlanner() {}

  /**
   * Plans swaps for {@code g} with fixed parameters.
   *
   * @throws IllegalArgumentException when a main parameter is -1, or a scope or type filter
   *                                  matches no op
   */
  public static SwapPlan plan(DataflowGraph g, SwapParams p) {
    return plan(g, p, TensorPolicy.of(g, TensorPolicy.Spec.from(p)));
  }

  /**
   * Plans with {@code p}'s level parameters; what may be swapped, and which consumers may read a
   * swap-in, comes from {@code policy} (TFLMS's own exclusions, e.g. assignments and random ops,
   * still apply).
   */
  public static SwapPlan plan(DataflowGraph g, SwapParams p, TensorPolicy policy) {
    if (p.swapoutThreshold() < 0 || p.swapinGroupby() < 0
        || (p.swapinAhead() < 1 && p.syncMode() < 2)) {
      throw new IllegalArgumentException("plan() needs swapout_threshold >= 0, swapin_groupby >= 0 "
          + "and swapin_ahead >= 1 (or sync_mode 2/3); use SwapAutoTuner for -1 values");
    }
    checkFilters(g, policy.spec());
    List<SwapPlan.ControlEdge> serial = p.serialization().isEmpty()
        && p.serializationBySize() == 0 ? List.of() : serializationEdges(g, Levels.of(g), p);
    Prepared prep = Prepared.of(g, serial, p);
    DataflowGraph sg = prep.graph;
    Levels lv = prep.levels;
    TriggerFinder triggers0 = prep.finder;
    boolean syncIn = p.syncMode() >= 2;
    boolean syncOut = p.syncMode() == 1 || p.syncMode() == 3;
    int groupby = syncIn ? 0 : p.swapinGroupby();
    List<SwapPlan.SwapOut> swaps = new ArrayList<>();
    boolean[] foldable = prep.foldable;
    for (Op prod : sg.ops()) {
      if (!sourceEligible(prod) || foldable[prod.id()]) {
        continue;
      }
      for (int i = 0; i < prod.outputs().size(); i++) {
        Tensor t = prod.output(i);
        TensorId tid = new TensorId(prod.id(), i);
        if (t.rank() <= 1 || !policy.maySwap(sg, tid)) {
          continue;
        }
        int[] cons = java.util.Arrays.stream(sg.consumers(tid)).distinct().toArray();
        List<Integer> far = new ArrayList<>();
        List<String> near = new ArrayList<>();
        for (int c : cons) {
          Op co = sg.op(c);
          boolean shapeOnly = OpTypes.SHAPE_ONLY.contains(co.type());
          if (!shapeOnly && lv.level(c) - lv.level(prod.id()) > p.swapoutThreshold()
              && destEligible(co, policy) && !OpTypes.orderSensitive(co)) {
            far.add(c);
          } else if (!shapeOnly) {
            near.add(co.name());
          }
        }
        if (far.isEmpty()) {
          continue;
        }
        String base = OpTypes.LMS_PREFIX + "swapout/" + prod.name() + "_" + i;
        List<SwapPlan.SwapIn> ins = new ArrayList<>();
        int k = 0;
        for (List<Integer> group : groupBy(far, lv, groupby)) {
          int first = group.get(0);
          List<String> triggers;
          if (syncIn) {
            triggers = syncTriggers(sg, lv, first, prod.id());
          } else {
            int trig = triggers0.find(prod.id(), first, p.swapinAhead());
            triggers = trig >= 0 ? List.of(sg.op(trig).name())
                : syncTriggers(sg, lv, first, prod.id());
            if (trig < 0 && p.debug()) {
              LOG.info("[LMS][1] No control dependency op found for the swap-in of {} into {}.",
                  sg.tensorName(tid), sg.op(first).name());
            }
          }
          ins.add(new SwapPlan.SwapIn(OpTypes.LMS_PREFIX + "swapin/" + prod.name() + "_" + i
              + "/" + k++, group.stream().map(c -> sg.op(c).name()).toList(), triggers));
        }
        swaps.add(new SwapPlan.SwapOut(prod.name(), i, t.dtype(), t.bytes(), base, ins,
            syncOut ? near : List.of()));
        if (p.debug()) {
          LOG.info("[LMS][1] Swap-out: Tensor {} (shape: {}, {} bytes) -> {} swap-in(s)",
              sg.tensorName(tid), java.util.Arrays.toString(t.shape()), t.bytes(), ins.size());
          if (p.debugLevel() >= 2) {
            for (SwapPlan.SwapIn si : ins) {
              LOG.info("[LMS][2]   {} => {} triggered by {}", si.name(), si.consumers(),
                  si.triggers());
            }
          }
        }
      }
    }
    return new SwapPlan(p, swaps, serial);
  }

  /**
   * What a plan needs of a graph besides the parameters: the serialized graph, its levels, the
   * trigger finder and the foldable ops. The last one is kept per thread: the auto-tuner plans the
   * same graph many times.
   */
  private static final class Prepared {
    private static final ThreadLocal<Prepared> LAST = new ThreadLocal<>();
    final DataflowGraph base;
    final List<SwapPlan.ControlEdge> serial;
    final DataflowGraph graph;
    final Levels levels;
    final TriggerFinder finder;
    final boolean[] foldable;

    private Prepared(DataflowGraph base, List<SwapPlan.ControlEdge> serial, SwapParams p) {
      this.base = base;
      this.serial = serial;
      graph = serial.isEmpty() ? base : PlanApplier.apply(base, new SwapPlan(p, List.of(), serial));
      levels = Levels.of(graph);
      finder = new TriggerFinder(graph, levels);
      foldable = graph.constantFoldable();
    }

    static Prepared of(DataflowGraph g, List<SwapPlan.ControlEdge> serial, SwapParams p) {
      Prepared last = LAST.get();
      if (last != null && last.base == g && last.serial.equals(serial)) {
        return last;
      }
      Prepared fresh = new Prepared(g, serial, p);
      LAST.set(fresh);
      return fresh;
    }
  }

  /** False for the op types TFLMS never swaps from, beyond the tensor policy's exclusions. */
  static boolean sourceEligible(Op op) {
    return !NEVER.contains(op.type());
  }

  /**
   * True when this consumer may be fed by a swap-in: the tensor policy allows it (its input
   * filters; recompute clones may, swap ops may not) and TFLMS does not exclude its type.
   */
  static boolean destEligible(Op op, TensorPolicy policy) {
    return !NEVER.contains(op.type()) && policy.maySwapInto(op);
  }

  /** Every scope and type a filter names must match some op (TFLMS's check). */
  static void checkFilters(DataflowGraph g, TensorPolicy.Spec p) {
    Set<String> scopes = new java.util.TreeSet<>();
    scopes.addAll(p.exclOutputScopes());
    scopes.addAll(p.inclOutputScopes());
    scopes.addAll(p.exclInputScopes());
    scopes.addAll(p.inclInputScopes());
    Set<String> types = new java.util.TreeSet<>();
    types.addAll(p.exclOutputTypes());
    types.addAll(p.inclOutputTypes());
    types.addAll(p.exclInputTypes());
    types.addAll(p.inclInputTypes());
    for (String s : scopes) {
      if (g.ops().stream().noneMatch(o -> o.name().startsWith(s))) {
        throw new IllegalArgumentException("No operations were found with scope " + s + ".");
      }
    }
    for (String t : types) {
      if (g.ops().stream().noneMatch(o -> o.type().equals(t))) {
        throw new IllegalArgumentException("No operations were found with type " + t + ".");
      }
    }
  }

  /** Groups consumers (sorted by level) into intervals whose gaps are at most {@code limit}. */
  private static List<List<Integer>> groupBy(List<Integer> far, Levels lv, int limit) {
    List<Integer> sorted = new ArrayList<>(far);
    sorted.sort(Comparator.comparingInt((Integer c) -> lv.level(c)).thenComparingInt(c -> c));
    List<List<Integer>> groups = new ArrayList<>();
    List<Integer> cur = null;
    int end = Integer.MIN_VALUE;
    for (int c : sorted) {
      if (cur == null || limit <= 0 || lv.level(c) - end > limit) {
        cur = new ArrayList<>();
        groups.add(cur);
      }
      cur.add(c);
      end = lv.level(c);
    }
    return groups;
  }

  /**
   * TFLMS's trigger search, in O(log n) per query: walking back from {@code dest} along its
   * longest data path (each step to the data input with the highest level), the first op at a
   * level {@code <= level(dest) - ahead - 1}; it must lie at or above
   * {@code lb = max(level(dest) - ahead - 10, level(producer) + 1)}. TFLMS looks for any op in
   * that window that reaches {@code dest}; the longest path gives one without a search over all
   * ancestors, which would cost O(n) per swap-in. {@link #find} returns -1 when there is none.
   * Binary lifting over each op's highest-level data input.
   */
  static final class TriggerFinder {
    private final DataflowGraph g;
    private final Levels lv;
    private final int[][] up;

    TriggerFinder(DataflowGraph g, Levels lv) {
      this.g = g;
      this.lv = lv;
      int n = g.size();
      int logs = 1;
      while ((1 << logs) < Math.max(2, lv.count())) {
        logs++;
      }
      up = new int[logs + 1][n];
      for (int v = 0; v < n; v++) {
        int best = v;
        for (TensorId in : g.op(v).inputs()) {
          if (best == v || lv.level(in.op()) > lv.level(best)
              || (lv.level(in.op()) == lv.level(best) && in.op() < best)) {
            best = in.op();
          }
        }
        up[0][v] = best;
      }
      for (int k = 1; k <= logs; k++) {
        for (int v = 0; v < n; v++) {
          up[k][v] = up[k - 1][up[k - 1][v]];
        }
      }
    }

    int find(int producer, int dest, int ahead) {
      int ub = lv.level(dest) - ahead;
      int lb = Math.max(ub - TRIGGER_SEARCH_LEVELS, lv.level(producer) + 1);
      int target = ub - 1;
      if (target < lb) {
        return -1;
      }
      int v = dest;
      for (int k = up.length - 1; k >= 0; k--) {
        int u = up[k][v];
        if (lv.level(u) > target) {
          v = u;
        }
      }
      int t = up[0][v];
      if (t == v || lv.level(t) > target || lv.level(t) < lb) {
        return -1;
      }
      Op o = g.op(t);
      if (MemorySimulator.isPinned(o) || o.name().startsWith(OpTypes.LMS_PREFIX)) {
        return -1;
      }
      return t;
    }
  }

  /**
   * TFLMS's synchronous swap-in: the consumer's other inputs (data and control); when it has
   * none, the ops one level before it.
   */
  static List<String> syncTriggers(DataflowGraph g, Levels lv, int dest, int producer) {
    Set<String> out = new LinkedHashSet<>();
    for (int p : g.predecessors(dest)) {
      Op po = g.op(p);
      if (p != producer && !MemorySimulator.isPinned(po)
          && !po.name().startsWith(OpTypes.LMS_PREFIX)) {
        out.add(po.name());
      }
    }
    if (out.isEmpty() && lv.level(dest) > 0) {
      for (int o : lv.opsAt(lv.level(dest) - 1)) {
        Op oo = g.op(o);
        if (o != producer && !MemorySimulator.isPinned(oo)) {
          out.add(oo.name());
        }
      }
    }
    return List.copyOf(out);
  }

  /**
   * Control edges that serialize the chosen levels: the ops of each level (after the last level
   * holding a variable {@code Assign}) are chained in id order, and consecutive chosen levels are
   * linked last-to-first.
   */
  static List<SwapPlan.ControlEdge> serializationEdges(DataflowGraph g, Levels lv, SwapParams p) {
    Set<Integer> chosen = new java.util.TreeSet<>();
    for (LevelSlice s : p.serializationSlices()) {
      for (int l = s.from(); l < Math.min(s.to(), lv.count()); l++) {
        chosen.add(l);
      }
    }
    if (p.serializationBySize() > 0) {
      double limit = p.serializationBySize() * (1L << 30);
      for (int l = 0; l < lv.count(); l++) {
        long bytes = 0;
        for (int o : lv.opsAt(l)) {
          Op op = g.op(o);
          bytes += op.transientOutputBytes();
          for (TensorId in : op.inputs()) {
            bytes += g.tensor(in).bytes();
          }
        }
        if (bytes > limit) {
          chosen.add(l);
        }
      }
    }
    if (chosen.isEmpty()) {
      return List.of();
    }
    int maxAssign = 0;
    for (Op op : g.ops()) {
      if (op.type().equals("Assign")) {
        maxAssign = Math.max(maxAssign, lv.level(op.id()));
      }
    }
    List<SwapPlan.ControlEdge> edges = new ArrayList<>();
    String prevLast = null;
    int prevLevel = -2;
    for (int l : chosen) {
      if (l <= maxAssign) {
        continue;
      }
      List<String> names = new ArrayList<>();
      for (int o : lv.opsAt(l)) {
        Op op = g.op(o);
        if (!MemorySimulator.isPinned(op)) {
          names.add(op.name());
        }
      }
      if (names.isEmpty()) {
        continue;
      }
      if (prevLast != null && l - prevLevel == 1) {
        edges.add(new SwapPlan.ControlEdge(prevLast, names.get(0)));
      }
      for (int k = 1; k < names.size(); k++) {
        edges.add(new SwapPlan.ControlEdge(names.get(k - 1), names.get(k)));
      }
      prevLast = names.get(names.size() - 1);
      prevLevel = l;
    }
    return edges;
  }
}
