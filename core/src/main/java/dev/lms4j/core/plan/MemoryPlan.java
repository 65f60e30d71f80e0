package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One plan: what to recompute, what to swap, what the planner predicted, and the parameters it
 * chose. Recomputation is applied first, then swaps (whose names refer to the graph with the
 * clones in it): {@link #applyTo} is the one place that does it on lms4j's model, as the
 * TensorFlow adapter's rewrite does on a GraphDef.
 *
 * <p>The recompute part may come in stages, each planned on the graph with the earlier stages
 * applied (the ops every mode must recompute, then the planner's own choice); most plans have
 * one stage or none.
 *
 * <pre>{@code
 * MemoryPlan p = LmsMode.AUTO.planner().plan(graph, ctx);
 * DataflowGraph after = p.applyTo(graph);
 * long peak = p.estimate().peakAfter();
 * }</pre>
 *
 * @param planner         the planner's name (for reports: "hybrid", "tflms", ...)
 * @param recomputeStages the recompute plans, applied in order
 * @param swaps           the swaps, applied after recomputation
 * @param estimate        predicted peaks and step times before and after
 * @param params          the TFLMS parameters chosen (tuned values), or null when the planner has
 *                        none
 */
public record MemoryPlan(String planner, List<RecomputePlan> recomputeStages, SwapPlan swaps,
    Estimate estimate, SwapParams params) {

  /**
   * What the planner predicted.
   *
   * @param peakBefore   simulated peak of the graph as it is, bytes
   * @param peakAfter    simulated peak with the plan applied, bytes
   * @param stepMsBefore predicted step time as it is, milliseconds
   * @param stepMsAfter  predicted step time with the plan, milliseconds
   * @param simulations  how many simulations planning took
   */
  public record Estimate(long peakBefore, long peakAfter, double stepMsBefore,
      double stepMsAfter, int simulations) {}

  public MemoryPlan {
    Objects.requireNonNull(planner);
    recomputeStages = recomputeStages.stream().filter(r -> !r.isEmpty()).toList();
    Objects.requireNonNull(swaps);
    Objects.requireNonNull(estimate);
  }

  /** A plan that changes nothing: the graph fits as it is (or nothing could be done). */
  public static MemoryPlan unchanged(String planner, DataflowGraph g, PlanningContext ctx,
      long peak) {
    double ms = ctx.costModel().computeMs(g);
    return new MemoryPlan(planner, List.of(), SwapPlan.empty(ctx.params()),
        new Estimate(peak, peak, ms, ms, 0), null);
  }

  /**
   * A plan with one recompute stage and swaps; the step times come from the context's cost
   * model.
   */
  public static MemoryPlan of(String planner, DataflowGraph g, RecomputePlan recompute,
      SwapPlan swaps, long peakBefore, long peakAfter, int simulations, PlanningContext ctx) {
    MemoryPlan p = new MemoryPlan(planner, List.of(recompute), swaps,
        new Estimate(peakBefore, peakAfter, 0, 0, simulations), null);
    return p.withEstimate(new Estimate(peakBefore, peakAfter, ctx.costModel().computeMs(g),
        p.stepMs(g, ctx), simulations));
  }

  /** True when the plan changes the graph. */
  public boolean needed() {
    return !recomputeStages.isEmpty() || !swaps.isEmpty();
  }

  /** Every recompute group of every stage, for counting and listing (not for applying). */
  public RecomputePlan recompute() {
    if (recomputeStages.size() == 1) {
      return recomputeStages.get(0);
    }
    List<RecomputePlan.Group> all = new ArrayList<>();
    recomputeStages.forEach(r -> all.addAll(r.groups()));
    return new RecomputePlan(all);
  }

  /** The graph with the recompute stages applied, in order (swaps not yet). */
  public DataflowGraph applyRecompute(DataflowGraph g) {
    DataflowGraph r = g;
    for (RecomputePlan stage : recomputeStages) {
      r = RecomputeApplier.apply(r, stage);
    }
    return r;
  }

  /** The graph with the whole plan applied: recomputation, then swaps. */
  public DataflowGraph applyTo(DataflowGraph g) {
    return PlanApplier.apply(applyRecompute(g), swaps);
  }

  /** Simulated peak of {@code g} with the plan applied, on the levelled schedule. */
  public long simulatePeak(DataflowGraph g) {
    return MemorySimulator.levelledPeak(applyTo(g));
  }

  /** Predicted step time of {@code g} with the plan, milliseconds. */
  public double stepMs(DataflowGraph g, PlanningContext ctx) {
    if (recomputeStages.size() <= 1) {
      return PlanCosts.stepMs(ctx.costModel(), g, swaps, recompute());
    }
    double recomputeMs = 0;
    DataflowGraph r = g;
    for (RecomputePlan stage : recomputeStages) {
      recomputeMs += PlanCosts.recomputeMs(ctx.costModel(), r, stage);
      r = RecomputeApplier.apply(r, stage);
    }
    return PlanCosts.stepMs(ctx.costModel(), r, swaps, RecomputePlan.empty())
        - ctx.costModel().computeMs(r) + ctx.costModel().computeMs(g) + recomputeMs;
  }

  /** The same plan under another planner name. */
  public MemoryPlan withPlanner(String name) {
    return new MemoryPlan(name, recomputeStages, swaps, estimate, params);
  }

  /** The same plan with another estimate. */
  public MemoryPlan withEstimate(Estimate e) {
    return new MemoryPlan(planner, recomputeStages, swaps, e, params);
  }

  /** The same plan recording the TFLMS parameters chosen. */
  public MemoryPlan withParams(SwapParams p) {
    return new MemoryPlan(planner, recomputeStages, swaps, estimate, p);
  }

  /**
   * This plan run after {@code first}: {@code first}'s recompute stages come before this plan's
   * (which was planned on the graph with them applied); swaps are this plan's.
   */
  public MemoryPlan after(RecomputePlan first) {
    List<RecomputePlan> stages = new ArrayList<>();
    stages.add(first);
    stages.addAll(recomputeStages);
    return new MemoryPlan(planner, stages, swaps, estimate, params);
  }

  /** The same plan with other swaps. */
  public MemoryPlan withSwaps(SwapPlan s) {
    return new MemoryPlan(planner, recomputeStages, s, estimate, params);
  }
}
