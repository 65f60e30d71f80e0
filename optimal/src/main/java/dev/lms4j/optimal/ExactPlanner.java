package dev.lms4j.optimal;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.Planner;
import dev.lms4j.core.plan.PlanningContext;
import dev.lms4j.core.plan.PlanningException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The exact reference behind the {@link Planner} interface ({@code LmsMode.OPTIMAL}, found
 * through {@link java.util.ServiceLoader} when this module is on the class path): it solves
 * {@link OptimalPlanner}'s problem for the context's budget, cost model, tier and tensor
 * policy, and returns the solution as a plan for lms4j's own appliers ({@link ExactPlan}). The
 * plan's predicted peak is the simulator's, in the order the reference assumes (its stages,
 * with each inserted op just before the stage it serves), not the solver's own accounting.
 *
 * <pre>{@code
 * MemoryPlan p = LmsMode.OPTIMAL.plan(graph, PlanningContext.of(Budget.of(budget), policy));
 * }</pre>
 */
public final class ExactPlanner implements Planner {
  private static final Logger LOG = LoggerFactory.getLogger(ExactPlanner.class);

  /** Default solver limit, in CP-SAT's deterministic time (about seconds of one worker). */
  public static final double DEFAULT_TIME_LIMIT = 60;

  private final double timeLimit;

  /** The reference with the default solver limit (the {@link java.util.ServiceLoader} entry). */
  public ExactPlanner() {
    this(DEFAULT_TIME_LIMIT);
  }

  /** The reference with another solver limit, in CP-SAT's deterministic time. */
  public ExactPlanner(double timeLimit) {
    if (!(timeLimit > 0)) {
      throw new IllegalArgumentException("time limit must be > 0, got " + timeLimit);
    }
    this.timeLimit = timeLimit;
  }

  @Override
  public String name() {
    return "optimal";
  }

  @Override
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    return solve(g, ctx).plan();
  }

  /**
   * Plans {@code g} and returns the plan with the order it assumes and that order's simulated
   * peak; a graph that fits as it is gives an empty plan.
   *
   * @throws PlanningException when the solver finds no plan; it names the model's floor
   *     ({@link OptimalPlanner.Problem#floorBytes()}): no budget below it can work
   */
  public ExactPlan solve(DataflowGraph g, PlanningContext ctx) {
    Budget b = ctx.requireBudget(name());
    OptimalPlanner.Options o = new OptimalPlanner.Options(b.bytes(), b.memRatio(),
        ctx.costModel(), ctx.tier(), true, true, timeLimit, true);
    OptimalPlanner.Problem pr = OptimalPlanner.problem(g, o, ctx.policy());
    OptimalPlanner.Result r = OptimalPlanner.solve(pr, timeLimit);
    if (!r.feasible()) {
      long floor = b.smallestBudgetFor(pr.floorBytes());
      throw new PlanningException(String.format("the exact reference found no plan under a "
          + "limit of %.1f MiB (%s); the smallest budget that could work is %.1f MiB",
          b.limit() / 1048576.0, r.status(), floor / 1048576.0), floor);
    }
    ExactPlan p = ExactPlan.of(name(), g, pr, r, ctx);
    LOG.info("Exact reference as a plan: {} swap-outs, {} clones, simulated peak {} bytes "
        + "(limit {}), {} order", p.plan().swaps().swapOuts().size(),
        p.plan().recompute().clonedOps(), p.simulatedPeak(), b.limit(),
        p.faithful() ? "the reference's" : "a dependency-corrected");
    return p;
  }
}
