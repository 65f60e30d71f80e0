package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The decisions a {@link TensorPolicy} forces in every mode, around any planner: the ops to
 * recompute ({@code _recompute_hint}, named ops) become the first recompute stage and the planner
 * plans the rest on the graph with them applied; the inputs to swap ({@code _swap_to_host}) are
 * added to the planner's swaps (a swap-in per annotated consumer, triggered by the consumer's
 * other inputs), unless the planner already feeds that consumer a swap-in of the tensor.
 */
final class ForcedDecisions {
  /** Name of a plan that holds only forced decisions. */
  static final String MANUAL = "manual-recompute";

  private ForcedDecisions() {}

  /**
   * Plans {@code g} with {@code inner} around the forced decisions; {@code inner} null plans
   * nothing beyond them.
   */
  static MemoryPlan plan(Planner inner, DataflowGraph g, PlanningContext ctx) {
    TensorPolicy pol = ctx.policy();
    if (!pol.forcesDecisions()) {
      return inner == null ? MemoryPlan.unchanged(MANUAL, g, ctx,
          RecomputePlanner.peak(g, RecomputePlan.empty())) : inner.plan(g, ctx);
    }
    RecomputePlan forced = pol.mustRecompute().isEmpty() ? RecomputePlan.empty()
        : renamed(RecomputePlanner.manual(g, pol.mustRecompute()));
    DataflowGraph g1 = RecomputeApplier.apply(g, forced);
    MemoryPlan rest = inner == null ? null : inner.plan(g1, ctx);
    String name = rest == null || !rest.needed() ? MANUAL
        : forced.isEmpty() ? rest.planner() : MANUAL + "+" + rest.planner();
    SwapPlan swaps = rest == null ? SwapPlan.empty(ctx.params()) : rest.swaps();
    DataflowGraph g2 = rest == null ? g1 : rest.applyRecompute(g1);
    swaps = withForcedSwaps(g, g2, swaps, pol);
    List<RecomputePlan> stages = new ArrayList<>();
    stages.add(forced);
    if (rest != null) {
      stages.addAll(rest.recomputeStages());
    }
    MemoryPlan out = new MemoryPlan(name, stages, swaps,
        new MemoryPlan.Estimate(0, 0, 0, 0, 0), rest == null ? null : rest.params());
    long before = RecomputePlanner.peak(g, RecomputePlan.empty());
    int sims = rest == null ? 0 : rest.estimate().simulations();
    return out.withEstimate(new MemoryPlan.Estimate(before, out.simulatePeak(g),
        ctx.costModel().computeMs(g), out.stepMs(g, ctx), sims + 2));
  }

  /** Group names of their own, so that a later stage's groups cannot clash with them. */
  private static RecomputePlan renamed(RecomputePlan p) {
    List<RecomputePlan.Group> out = new ArrayList<>();
    for (RecomputePlan.Group gr : p.groups()) {
      out.add(new RecomputePlan.Group("m" + gr.name(), gr.ops(), gr.repoints(), gr.triggers(),
          gr.bytes()));
    }
    return new RecomputePlan(out);
  }

  /**
   * {@code swaps} (named against {@code g2}, the graph after recomputation) plus a swap-in for
   * every forced input of {@code g} not already fed by one.
   */
  static SwapPlan withForcedSwaps(DataflowGraph g, DataflowGraph g2, SwapPlan swaps,
      TensorPolicy pol) {
    if (pol.mustSwap().isEmpty()) {
      return swaps;
    }
    List<SwapPlan.SwapOut> outs = new ArrayList<>(swaps.swapOuts());
    Levels lv = Levels.of(g2);
    for (TensorPolicy.ForcedSwap f : pol.mustSwap()) {
      Op prod = g.op(f.tensor().op());
      int output = f.tensor().output();
      Op prod2 = g2.opOrThrow(prod.name());
      int idx = -1;
      for (int i = 0; i < outs.size(); i++) {
        if (outs.get(i).producer().equals(prod.name()) && outs.get(i).output() == output) {
          idx = i;
        }
      }
      Set<String> covered = new LinkedHashSet<>();
      if (idx >= 0) {
        outs.get(idx).swapIns().forEach(si -> covered.addAll(si.consumers()));
      }
      List<SwapPlan.SwapIn> added = new ArrayList<>();
      int k = idx >= 0 ? outs.get(idx).swapIns().size() : 0;
      for (int c : f.consumers()) {
        String consumer = g.op(c).name();
        if (covered.contains(consumer)) {
          continue;
        }
        int dest = g2.opOrThrow(consumer).id();
        added.add(new SwapPlan.SwapIn(OpTypes.LMS_PREFIX + "swapin/" + prod.name() + "_"
            + output + "/h" + k++, List.of(consumer),
            TflmsSwapPlanner.syncTriggers(g2, lv, dest, prod2.id())));
      }
      if (added.isEmpty()) {
        continue;
      }
      if (idx >= 0) {
        SwapPlan.SwapOut so = outs.get(idx);
        List<SwapPlan.SwapIn> ins = new ArrayList<>(so.swapIns());
        ins.addAll(added);
        outs.set(idx, new SwapPlan.SwapOut(so.producer(), so.output(), so.dtype(), so.bytes(),
            so.name(), ins, so.syncConsumers()));
      } else {
        Tensor t = g.tensor(new TensorId(prod.id(), output));
        outs.add(new SwapPlan.SwapOut(prod.name(), output, t.dtype(), t.bytes(),
            OpTypes.LMS_PREFIX + "swapout/" + prod.name() + "_" + output, added, List.of()));
      }
    }
    return new SwapPlan(swaps.params(), outs, swaps.controlEdges());
  }
}
