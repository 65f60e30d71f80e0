package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code auto}: a best-of over candidate planners, each planned for the same budget; the plan
 * the cost model predicts fastest is kept and the log names the choice. A graph that fits as it
 * is gets no plan ("LMS is not necessary"). When no candidate fits, the failure naming the
 * smallest budget is thrown. (XLA-style remat is not a candidate: on GPT-2 its plans moved a loss
 * by one ulp; see the README's known issues.) Needs a budget.
 */
final class AutoPlanner implements Planner {
  private static final Logger LOG = LoggerFactory.getLogger(AutoPlanner.class);
  private final List<Planner> candidates;

  AutoPlanner(List<Planner> candidates) {
    this.candidates = List.copyOf(candidates);
  }

  @Override
  public String name() {
    return "auto";
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
    for (Planner c : candidates) {
      MemoryPlan p;
      try {
        p = c.plan(g, ctx);
      } catch (PlanningException e) {
        LOG.info("[LMS][0] auto: the {} planner found no plan ({})", c.name(), e.getMessage());
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
    LOG.info("[LMS][0] auto: predicted step time {}: {} plan chosen", why, best.planner());
    return best;
  }
}
