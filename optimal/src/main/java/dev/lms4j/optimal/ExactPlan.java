package dev.lms4j.optimal;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.PlanningContext;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.UnionFind;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * A solution of the exact reference made into a {@link MemoryPlan} for lms4j's own appliers,
 * with the op order the reference assumes and the simulator's peak in that order.
 *
 * <p>Each {@link OptimalPlanner.Move} starts a new version of its tensor just before its stage:
 * a swap-in (the tensor is swapped out once, right after its producer) or a clone of its
 * producer. Every reader, original op or clone, reads the version current at its stage, so a
 * tensor's original buffer lives from its producer to the last reader before its first move,
 * as the reference's {@code S} variables say. Clones that read other clones form one recompute
 * group (the applier wires clone to clone only inside a group); a swap-in's readers may be
 * clones.
 *
 * <p>The order: the reference's stages (the levelled schedule) with each swap-out right after
 * its producer and, before each stage, its swap-ins and then its clones. The rewritten graph is
 * sorted topologically with those positions as priorities; {@link #faithful()} says whether no
 * dependency had to move an op from its position. A plan is checked by simulating that order:
 * the reference's claim is only as good as that simulation.
 *
 * @param plan          the plan (recompute groups, then swaps)
 * @param applied       the graph with the plan applied by lms4j's appliers
 * @param order         the order of {@code applied}'s ops the reference assumes
 * @param faithful      true when that order is the reference's positions exactly
 * @param simulatedPeak the simulator's peak of {@code applied} in {@code order}, bytes
 * @param solution      the solver's result the plan was made from
 */
public record ExactPlan(MemoryPlan plan, DataflowGraph applied, int[] order, boolean faithful,
    long simulatedPeak, OptimalPlanner.Result solution) {

  /**
   * Builds the plan of solution {@code r} of problem {@code pr} (made for {@code g}).
   *
   * @throws IllegalStateException when the solution cannot be written with lms4j's groups (a
   *     clone group would need two versions of one tensor, or one op twice)
   */
  public static ExactPlan of(String planner, DataflowGraph g, OptimalPlanner.Problem pr,
      OptimalPlanner.Result r, PlanningContext ctx) {
    return new Builder(g, pr, r).build(planner, ctx, r);
  }

  private static final class Builder {
    private final DataflowGraph g;
    private final OptimalPlanner.Problem pr;
    private final List<OptimalPlanner.Item> items;
    private final int[] pos;
    private final Map<TensorId, Integer> itemOf = new HashMap<>();
    /** Per item: stage -> the move starting a version there. */
    private final List<TreeMap<Integer, OptimalPlanner.Move>> versions = new ArrayList<>();

    Builder(DataflowGraph g, OptimalPlanner.Problem pr, OptimalPlanner.Result r) {
      this.g = g;
      this.pr = pr;
      this.items = pr.items();
      pos = new int[g.size()];
      for (int k = 0; k < pr.order().length; k++) {
        pos[pr.order()[k]] = k;
      }
      for (int i = 0; i < items.size(); i++) {
        itemOf.put(items.get(i).id(), i);
        versions.add(new TreeMap<>());
      }
      for (OptimalPlanner.Move m : r.moves()) {
        // a swap-in and a recomputation for one stage: one version is enough, the swap-in's
        versions.get(m.item()).merge(m.stage(), m, (a, b) -> a.recompute() ? b : a);
      }
    }

    /** The move whose version item {@code i} has at stage {@code k}, or null: the original. */
    private OptimalPlanner.Move version(int i, int k) {
      Map.Entry<Integer, OptimalPlanner.Move> e = versions.get(i).floorEntry(k);
      return e == null ? null : e.getValue();
    }

    private Op producer(OptimalPlanner.Move m) {
      return g.op(items.get(m.item()).id().op());
    }

    /** Original readers of item {@code i} (data edges that need the buffer), once each. */
    private Set<Integer> readers(int i) {
      Set<Integer> out = new LinkedHashSet<>();
      for (int c : g.consumers(items.get(i).id())) {
        if (!OpTypes.SHAPE_ONLY.contains(g.op(c).type())) {
          out.add(c);
        }
      }
      return out;
    }

    ExactPlan build(String planner, PlanningContext ctx, OptimalPlanner.Result r) {
      List<OptimalPlanner.Move> recomputes = new ArrayList<>();
      for (TreeMap<Integer, OptimalPlanner.Move> v : versions) {
        v.values().stream().filter(OptimalPlanner.Move::recompute).forEach(recomputes::add);
      }
      Map<OptimalPlanner.Move, Integer> index = new HashMap<>();
      for (int m = 0; m < recomputes.size(); m++) {
        index.put(recomputes.get(m), m);
      }
      // a clone reading another clone's version joins its group
      int[] parent = new int[recomputes.size()];
      for (int m = 0; m < parent.length; m++) {
        parent[m] = m;
      }
      for (OptimalPlanner.Move m : recomputes) {
        for (TensorId in : producer(m).inputs()) {
          Integer j = itemOf.get(in);
          OptimalPlanner.Move v = j == null ? null : version(j, m.stage());
          if (v != null && v.recompute()) {
            UnionFind.union(parent, index.get(m), index.get(v));
          }
        }
      }
      Map<Integer, List<OptimalPlanner.Move>> sets = new TreeMap<>();
      for (OptimalPlanner.Move m : recomputes) {
        sets.computeIfAbsent(UnionFind.find(parent, index.get(m)), x -> new ArrayList<>())
            .add(m);
      }
      Map<OptimalPlanner.Move, String> groupOf = new HashMap<>();
      // where each inserted op goes in the reference's order: {4 x stage + slot, tie-break};
      // slots: 0 swap-ins before the stage, 1 clones, 2 the stage's own op, 3 swap-outs after it
      Map<String, long[]> keyOf = new HashMap<>();
      List<RecomputePlan.Group> groups = new ArrayList<>();
      for (List<OptimalPlanner.Move> set : sets.values()) {
        set.sort(Comparator.comparingInt(m -> pos[producer(m).id()]));
        String name = "opt" + groups.size();
        List<String> ops = new ArrayList<>();
        List<RecomputePlan.Repoint> repoints = new ArrayList<>();
        Map<Integer, OptimalPlanner.Move> byOp = new HashMap<>();
        int first = Integer.MAX_VALUE;
        long bytes = 0;
        for (OptimalPlanner.Move m : set) {
          Op p = producer(m);
          if (byOp.put(p.id(), m) != null) {
            throw new IllegalStateException("the solution recomputes " + p.name()
                + " twice in one group");
          }
          ops.add(p.name());
          groupOf.put(m, name);
          keyOf.put(RecomputePlan.cloneName(name, p.name()),
              new long[] {4L * m.stage() + 1, pos[p.id()]});
          first = Math.min(first, m.stage());
          bytes += items.get(m.item()).bytes();
          TensorId t = items.get(m.item()).id();
          for (int c : readers(m.item())) {
            if (version(m.item(), pos[c]) == m) {
              repoints.add(new RecomputePlan.Repoint(g.op(c).name(), p.name(), t.output()));
            }
          }
        }
        // inside a group the applier wires clone to clone: that must be the version wanted
        for (OptimalPlanner.Move m : set) {
          for (TensorId in : producer(m).inputs()) {
            OptimalPlanner.Move member = byOp.get(in.op());
            Integer j = itemOf.get(in);
            if (member != null && (j == null || version(j, m.stage()) != member)) {
              throw new IllegalStateException("the solution's clone of " + producer(m).name()
                  + " would read another version of " + g.tensorName(in));
            }
          }
        }
        groups.add(new RecomputePlan.Group(name, ops, repoints,
            List.of(g.op(pr.order()[first - 1]).name()), bytes));
      }
      RecomputePlan recompute = new RecomputePlan(groups);

      List<SwapPlan.SwapOut> swapOuts = new ArrayList<>();
      for (int i = 0; i < items.size(); i++) {
        OptimalPlanner.Item it = items.get(i);
        Op p = g.op(it.id().op());
        String base = p.name() + "_" + it.id().output();
        List<SwapPlan.SwapIn> ins = new ArrayList<>();
        for (OptimalPlanner.Move m : versions.get(i).values()) {
          if (m.recompute()) {
            continue;
          }
          List<String> consumers = new ArrayList<>();
          for (int c : readers(i)) {
            if (version(i, pos[c]) == m) {
              consumers.add(g.op(c).name());
            }
          }
          for (OptimalPlanner.Move rm : recomputes) {
            if (producer(rm).inputs().contains(it.id()) && version(i, rm.stage()) == m) {
              consumers.add(RecomputePlan.cloneName(groupOf.get(rm), producer(rm).name()));
            }
          }
          if (consumers.isEmpty()) {
            continue; // a swap-in nothing reads: not part of the plan
          }
          String name = OptimalPlanner.SWAP_PREFIX + "in/" + base + "_" + m.stage();
          keyOf.put(name, new long[] {4L * m.stage(), keyOf.size()});
          ins.add(new SwapPlan.SwapIn(name, consumers,
              List.of(g.op(pr.order()[m.stage() - 1]).name())));
        }
        if (!ins.isEmpty()) {
          Tensor t = p.output(it.id().output());
          String name = OptimalPlanner.SWAP_PREFIX + "out/" + base;
          keyOf.put(name, new long[] {4L * it.produced() + 3, keyOf.size()});
          swapOuts.add(new SwapPlan.SwapOut(p.name(), it.id().output(), t.dtype(), t.bytes(),
              name, ins, List.of()));
        }
      }
      SwapPlan swaps = new SwapPlan(ctx.params(), swapOuts, List.of());

      MemoryPlan draft = MemoryPlan.of(planner, g, recompute, swaps, pr.peakWithoutLms(), 0, 1,
          ctx);
      DataflowGraph applied = draft.applyTo(g);
      long[][] keys = new long[applied.size()][];
      for (Op o : applied.ops()) {
        keys[o.id()] = o.id() < g.size() ? new long[] {4L * pos[o.id()] + 2, 0}
            : keyOf.get(o.name());
        if (keys[o.id()] == null) {
          throw new IllegalStateException("unexpected op " + o.name() + " in the plan");
        }
      }
      int[] order = applied.topologicalOrder((a, b) -> {
        int c = compare(keys[a], keys[b]);
        return c != 0 ? c : Integer.compare(a, b);
      });
      boolean faithful = true;
      for (int s = 1; s < order.length; s++) {
        faithful &= compare(keys[order[s - 1]], keys[order[s]]) <= 0;
      }
      long peak = MemorySimulator.simulate(applied, order).peakBytes();
      MemoryPlan plan = draft.withEstimate(new MemoryPlan.Estimate(pr.peakWithoutLms(), peak,
          draft.estimate().stepMsBefore(), draft.estimate().stepMsAfter(), 1));
      return new ExactPlan(plan, applied, order, faithful, peak, r);
    }
  }

  private static int compare(long[] a, long[] b) {
    int c = Long.compare(a[0], b[0]);
    return c != 0 ? c : Long.compare(a[1], b[1]);
  }
}
