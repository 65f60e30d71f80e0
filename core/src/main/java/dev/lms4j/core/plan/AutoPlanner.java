package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code auto}: a best-of over candidate planners, each planned for the same budget; the plan
 * the cost model predicts fastest is kept and the log names the choice. When none of them
 * fits, the fallbacks are tried the same way (the user-facing modes {@code swap}, {@code tflms}
 * and {@code remat}: greedy planners reach different budgets, and {@code auto} must reach
 * whatever any of them reaches). A graph that fits as it
 * is gets no plan ("LMS is not necessary"). When no candidate fits, the failure naming the
 * smallest budget is thrown. (XLA-style remat is not a candidate: on GPT-2 its plans moved a loss
 * by one ulp; see the README's known issues.) Needs a budget.
 */
final class AutoPlanner implements Planner {
  private static final Logger LOG = LoggerFactory.getLogger(AutoPlanner.class);
  private final String name;
  private final List<Planner> candidates;
  private final List<Planner> fallbacks;

  AutoPlanner(List<Planner> candidates) {
    this("auto", candidates, List.of());
  }

  /**
   * A best-of named {@code name} (as a mode's planner, e.g. {@code swap}: the cost-based swap
   * planner, with TFLMS's as the fallback).
   */
  AutoPlanner(String name, List<Planner> candidates, List<Planner> fallbacks) {
    this.name = name;
    this.candidates = List.copyOf(candidates);
    this.fallbacks = List.copyOf(fallbacks);
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    Budget b = ctx.requireBudget(name());
    long before = RecomputePlanner.peak(g, RecomputePlan.empty());
    if (b.fits(before)) {
      LOG.info("[LMS][0] LMS is not necessary. Turned LMS off. (simulated peak {} MiB)",
          Budget.mib(before));
      return MemoryPlan.unchanged(name(), g, ctx, before);
    }
    MemoryPlan best = null;
    PlanningException failure = null;
    StringBuilder why = new StringBuilder();
    List<Planner> all = new java.util.ArrayList<>(candidates);
    all.addAll(fallbacks);
    for (int i = 0; i < all.size(); i++) {
      Planner c = all.get(i);
      if (i == candidates.size()) {
        if (best != null) {
          break;
        }
        if (!fallbacks.isEmpty()) {
          LOG.info("[LMS][0] {}: no candidate fits; trying {}", name, fallbacks.stream()
              .map(Planner::name).toList());
        }
      }
      MemoryPlan p;
      try {
        p = c.plan(g, ctx);
      } catch (PlanningException e) {
        LOG.info("[LMS][0] {}: the {} planner found no plan ({})", name, c.name(),
            e.getMessage());
        if (failure == null || e.smallestBudgetBytes() < failure.smallestBudgetBytes()) {
          failure = e;
        }
        continue;
      }
      double ms = p.estimate().stepMsAfter();
      why.append(why.length() == 0 ? "" : ", ").append(c.name()).append(' ')
          .append(String.format("%.1f", ms)).append(" ms");
      if (best == null || ms < best.estimate().stepMsAfter()) {
        best = p;
      }
    }
    if (best == null) {
      throw failure;
    }
    LOG.info("[LMS][0] {}: predicted step time {}: {} plan chosen", name, why, best.planner());
    return best;
  }
}
