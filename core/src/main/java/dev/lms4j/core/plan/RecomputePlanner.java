package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
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
import java.util.TreeMap;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Chooses forward ops to recompute in the backward pass, as TensorFlow grappler's memory
 * optimizer does: connected groups of cheap ops whose outputs the backward pass reads are cloned,
 * so their outputs need not stay alive between the passes.
 *
 * <ul>
 *   <li>{@link #heuristic}: every such group of ops of {@link #CHEAP_OPS} types;</li>
 *   <li>{@link #manual}: groups of the ops the caller names (the {@code _recompute_hint}
 *       attribute, or the Java API);</li>
 *   <li>{@link #underBudget}: heuristic groups, largest first, added while the simulated peak is
 *       above the budget and each one lowers it.</li>
 * </ul>
 *
 * Random and stateful ops, feeds, variables and constants are never recomputed.
 *
 * <pre>{@code
 * RecomputePlan p = RecomputePlanner.underBudget(graph, 512L << 20, 0.8).plan();
 * }</pre>
 */
public final class RecomputePlanner {
  private static final Logger LOG = LoggerFactory.getLogger(RecomputePlanner.class);

  /** Op types grappler's recomputation heuristic treats as cheap (and a few alike). */
  public static final Set<String> CHEAP_OPS = Set.of("Add", "AddN", "AddV2", "BiasAdd", "Cast",
      "Fill", "FloorDiv", "FloorMod", "FusedBatchNorm", "FusedBatchNormV3", "Mul", "Neg",
      "RealDiv", "Reciprocal", "Relu", "Relu6", "Reshape", "Rsqrt", "Sigmoid", "Sqrt", "Square",
      "SquaredDifference", "Sub", "Tile", "Transpose", "Elu", "Selu", "Tanh", "LeakyRelu",
      "Maximum", "Minimum", "Softplus", "ExpandDims", "Squeeze", "Identity");

  private RecomputePlanner() {}

  /**
   * The outcome of {@link #underBudget}.
   *
   * @param plan          the chosen groups
   * @param needed        false when the graph fits without recomputation
   * @param predictedPeak simulated peak with the plan
   * @param simulations   simulator runs
   */
  public record Result(RecomputePlan plan, boolean needed, long predictedPeak, int simulations) {}

  /** Groups of cheap forward ops read by the backward pass (grappler's heuristic). */
  public static RecomputePlan heuristic(DataflowGraph g) {
    return new RecomputePlan(groups(g, op -> CHEAP_OPS.contains(op.type())));
  }

  /** Groups of the named ops (those that can be recomputed at all). */
  public static RecomputePlan manual(DataflowGraph g, Set<String> ops) {
    for (String name : ops) {
      Op op = g.opOrThrow(name);
      if (!recomputable(op)) {
        throw new IllegalArgumentException(name + " (" + op.type() + ") cannot be recomputed: "
            + "random, stateful, fed, variable, constant, an n-ary sum (AddN of 3 or more) or "
            + "not in the forward pass");
      }
    }
    return new RecomputePlan(groups(g, op -> ops.contains(op.name())));
  }

  /**
   * Heuristic groups, largest saving first, kept while the simulated peak is above
   * {@code budget * memRatio} and each lowers it.
   *
   * @throws PlanningException when even all useful groups do not fit
   */
  public static Result underBudget(DataflowGraph g, long budget, double memRatio) {
    Result r = bestEffort(g, budget, memRatio);
    long available = (long) (budget * memRatio);
    if (r.predictedPeak() > available) {
      long need = (long) Math.ceil(r.predictedPeak() / memRatio);
      throw new PlanningException("Recomputation cannot fit a budget of " + (budget >> 20)
          + " MiB: the smallest simulated peak was " + (r.predictedPeak() >> 20) + " MiB. The "
          + "smallest budget that could work with recomputation alone is about "
          + ((need + (1 << 20) - 1) >> 20) + " MiB.", need);
    }
    return r;
  }

  /**
   * As {@link #underBudget}, but when the budget cannot be met returns the groups that lowered
   * the peak most (for a planner that swaps the rest) instead of failing.
   */
  public static Result bestEffort(DataflowGraph g, long budget, double memRatio) {
    long available = (long) (budget * memRatio);
    long peak = peak(g, RecomputePlan.empty());
    int sims = 1;
    if (peak <= available) {
      LOG.info("[LMS][0] Recomputation is not necessary (simulated peak {} MiB).", peak >> 20);
      return new Result(RecomputePlan.empty(), false, peak, sims);
    }
    Greedy walk = g.derived(GREEDY, Greedy::new);
    List<RecomputePlan.Group> chosen = new ArrayList<>();
    synchronized (walk) {
      for (int i = 0; i < walk.all().size(); i++) {
        if (peak <= available) {
          break;
        }
        long p = walk.peakAfter(i, chosen);
        sims++;
        if (p < peak) {
          peak = p;
        } else {
          chosen.remove(chosen.size() - 1);
        }
      }
    }
    LOG.info("[LMS][0] Recomputing {} groups ({} ops): simulated peak {} MiB ({} simulations)",
        chosen.size(), chosen.stream().mapToInt(gr -> gr.ops().size()).sum(), peak >> 20, sims);
    return new Result(new RecomputePlan(chosen), true, peak, sims);
  }

  private static final Object GREEDY = new Object();

  /**
   * {@link #bestEffort}'s walk over a graph's groups, largest first: each group is added where
   * it lowers the simulated peak. Which groups it keeps does not depend on the budget, only
   * where it stops does, so the peaks simulated so far are kept with the graph
   * ({@link DataflowGraph#derived}) and a later call (the allocator check plans again at other
   * memory ratios) walks them again without simulating.
   */
  private static final class Greedy {
    private final DataflowGraph g;
    private final List<RecomputePlan.Group> all;
    /** The simulated peak after each group was tried (with the groups kept before it). */
    private final List<Long> peaks = new ArrayList<>();

    Greedy(DataflowGraph g) {
      this.g = g;
      this.all = new ArrayList<>(groups(g, op -> CHEAP_OPS.contains(op.type())));
      all.sort(Comparator.comparingLong(RecomputePlan.Group::bytes).reversed()
          .thenComparing(RecomputePlan.Group::name));
    }

    List<RecomputePlan.Group> all() {
      return all;
    }

    /**
     * Adds group {@code i} to {@code chosen} (the groups kept of those before it) and returns
     * the simulated peak with them all recomputed.
     */
    long peakAfter(int i, List<RecomputePlan.Group> chosen) {
      chosen.add(all.get(i));
      if (i == peaks.size()) {
        peaks.add(peak(g, new RecomputePlan(chosen)));
      }
      return peaks.get(i);
    }
  }

  /** Simulated peak of {@code g} with {@code plan} applied, on the levelled schedule. */
  public static long peak(DataflowGraph g, RecomputePlan plan) {
    return MemorySimulator.levelledPeak(RecomputeApplier.apply(g, plan));
  }

  /** True when an op may be recomputed at all (the tensor policy's built-in rule). */
  public static boolean recomputable(Op op) {
    return TensorPolicy.recomputable(op);
  }

  /**
   * Connected groups (through data edges) of recomputable ops accepted by {@code pick}, keeping
   * those whose outputs a backward op reads.
   */
  private static List<RecomputePlan.Group> groups(DataflowGraph g, Predicate<Op> pick) {
    int n = g.size();
    boolean[] in = new boolean[n];
    for (Op op : g.ops()) {
      in[op.id()] = recomputable(op) && pick.test(op);
    }
    int[] parent = new int[n];
    for (int i = 0; i < n; i++) {
      parent[i] = i;
    }
    for (Op op : g.ops()) {
      if (!in[op.id()]) {
        continue;
      }
      for (TensorId t : op.inputs()) {
        if (in[t.op()]) {
          UnionFind.union(parent, op.id(), t.op());
        }
      }
    }
    TreeMap<Integer, List<Integer>> comps = new TreeMap<>();
    for (int v : g.topologicalOrder()) {
      if (in[v]) {
        comps.computeIfAbsent(UnionFind.find(parent, v), k -> new ArrayList<>()).add(v);
      }
    }
    Levels lv = Levels.of(g);
    List<RecomputePlan.Group> out = new ArrayList<>();
    int k = 0;
    for (List<Integer> members : comps.values()) {
      List<RecomputePlan.Repoint> repoints = new ArrayList<>();
      int earliest = -1;
      long bytes = 0;
      for (int v : members) {
        Op op = g.op(v);
        for (int i = 0; i < op.outputs().size(); i++) {
          boolean read = false;
          for (int c : java.util.Arrays.stream(g.consumers(new TensorId(v, i))).distinct()
              .toArray()) {
            Op co = g.op(c);
            // an n-ary sum keeps reading the original: a clone's name would move the input in
            // the order grappler sorts the sum's inputs by (OpTypes.orderSensitive)
            if (co.category() != OpCategory.FORWARD && !OpTypes.SHAPE_ONLY.contains(co.type())
                && !OpTypes.orderSensitive(co)) {
              repoints.add(new RecomputePlan.Repoint(co.name(), op.name(), i));
              read = true;
              if (earliest < 0 || lv.level(c) < lv.level(earliest)
                  || (lv.level(c) == lv.level(earliest) && c < earliest)) {
                earliest = c;
              }
            }
          }
          if (read) {
            bytes += op.output(i).bytes();
          }
        }
      }
      if (repoints.isEmpty()) {
        continue;
      }
      List<String> triggers = triggers(g, earliest, members);
      if (triggers.isEmpty()) {
        continue;
      }
      out.add(new RecomputePlan.Group("g" + k++,
          members.stream().map(v -> g.op(v).name()).toList(), repoints, triggers, bytes));
    }
    return out;
  }

  /**
   * The earliest backward consumer's other inputs, preferring those outside the forward pass:
   * the clones start when that consumer's gradient input is ready.
   */
  private static List<String> triggers(DataflowGraph g, int dest, List<Integer> members) {
    Set<String> backward = new LinkedHashSet<>();
    Set<String> any = new LinkedHashSet<>();
    for (int p : g.predecessors(dest)) {
      Op po = g.op(p);
      if (members.contains(p) || MemorySimulator.isPinned(po)) {
        continue;
      }
      any.add(po.name());
      if (po.category() != OpCategory.FORWARD) {
        backward.add(po.name());
      }
    }
    return List.copyOf(backward.isEmpty() ? any : backward);
  }
}
