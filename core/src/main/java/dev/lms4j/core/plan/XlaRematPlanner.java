package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import java.util.Locale;

/**
 * XLA-style rematerialization ({@link Rematerializer}) in its standard or path mode, under the
 * budget's limit; tensors smaller than the context's minimum remat size are kept. Needs a budget.
 */
final class XlaRematPlanner implements Planner {
  private final Rematerializer.Mode mode;

  XlaRematPlanner(Rematerializer.Mode mode) {
    this.mode = mode;
  }

  @Override
  public String name() {
    return "xla-remat-" + mode.name().toLowerCase(Locale.ROOT);
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    Budget b = ctx.requireBudget(name());
    Rematerializer.Options o = Rematerializer.Options.defaults().withMode(mode)
        .withSmallNodeLimit(ctx.minRematBytes()).withCostModel(ctx.costModel())
        .withPolicy(ctx.policy());
    Rematerializer.Result r = Rematerializer.bestEffort(g, b.limit(), o);
    if (ctx.decisionsDump() != null) {
      r.dump(ctx.decisionsDump());
    }
    if (!r.fits()) {
      long need = b.smallestBudgetFor(r.peakAfter());
      throw new PlanningException("Rematerialization (" + mode.name().toLowerCase(Locale.ROOT)
          + ") cannot fit a budget of " + Budget.mib(b.bytes()) + " MiB: the smallest "
          + "simulated peak was " + Budget.mibUp(r.peakAfter()) + " MiB. The smallest budget "
          + "that could work with it is about " + Budget.mibUp(need) + " MiB.", need);
    }
    if (!r.needed()) {
      return MemoryPlan.unchanged(name(), g, ctx, r.peakBefore());
    }
    return MemoryPlan.of(name(), g, r.plan(), SwapPlan.empty(ctx.params()), r.peakBefore(),
        r.peakAfter(), r.simulations(), ctx);
  }
}
