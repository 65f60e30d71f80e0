package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.memory.Tier;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The cost-based planner: for each forward tensor the backward pass reads, keep it, swap it
 * (swap-out after its producer, one swap-in triggered by a backward op chosen so that, when
 * transfers overlap compute, the transfer hides behind the compute before its first backward
 * reader) or recompute its producer in the backward pass; any other tensor may be swapped
 * across the longest stretch of the schedule in which nothing reads it (a U-Net's skip tensor, a
 * gradient read again much later, as TFLMS swaps any tensor whose next reader is far);
 * minimising the step time the {@link CostModel} predicts while the simulated peak stays under
 * the budget. In the spirit of Capuchin (Peng et al. 2020: swap what hides behind compute, recompute what costs less than an
 * unhidden transfer) and SwapAdvisor (Huang et al. 2020: decide per tensor against a simulator).
 *
 * <p>The loop: simulate the current plan (both rewrites applied to the graph model, the levelled
 * schedule, {@link MemorySimulator}); among the undecided candidates alive at the peak, take the
 * cheapest per byte (predicted added milliseconds per byte freed) until their bytes cover the
 * excess over the budget; simulate again; keep the batch when the peak went down, else retry its
 * first candidate alone and, when that does not help either, move that candidate to its next
 * option (or drop it). Recomputed producers that read each other become one group (clones read
 * clones); a clone that reads a swapped tensor reads its swap-in, which then waits for the
 * earlier of its own trigger and the clone's. When the
 * plan fits, the most expensive decisions are undone while it still fits. The returned peak is
 * the simulator's on the rewritten model, never the planner's own bookkeeping. What may be
 * swapped (and which backward readers may read a swap-in) or recomputed comes from the
 * options' {@link TensorPolicy} only, so the user's filters hold here as in every mode.
 *
 * <p>The work is split over package-private classes: {@link HybridCandidates} (discovery and
 * pricing), {@link HybridState} (the decisions), {@link HybridEvaluator} (plans and simulation),
 * {@link HybridSearch} (the main loop) and {@link HybridRefinements} (upgrade, prune, local
 * search).
 *
 * <pre>{@code
 * HybridPlanner.Result r = HybridPlanner.plan(graph,
 *     HybridPlanner.Options.of(512L << 20).withCostModel(CostModel.defaults()));
 * GraphDef out = SwapRewriter.rewrite(RecomputeRewriter.rewrite(gd, r.recompute()), r.swaps(), ...);
 * }</pre>
 */
public final class HybridPlanner {
  private static final Logger LOG = LoggerFactory.getLogger(HybridPlanner.class);

  /**
   * What the planner may do and against what.
   *
   * @param budgetBytes    the device budget
   * @param memRatio       share of the budget the simulated peak may use
   * @param costModel      predicts op and transfer times
   * @param tier           where swapped tensors go
   * @param swap           swapping allowed
   * @param recompute      recomputation allowed
   * @param pruneLimit     at most this many decisions are tried for undoing once the plan fits
   * @param maxSimulations the loop stops after this many simulations
   * @param policy         what may be swapped or recomputed; null for the built-in rules
   *                       ({@link TensorPolicy#builtin}, computed when planning)
   */
  public record Options(long budgetBytes, double memRatio, CostModel costModel, Tier tier,
      boolean swap, boolean recompute, int pruneLimit, int maxSimulations, TensorPolicy policy) {
    /** Checks the values. */
    public Options {
      Objects.requireNonNull(costModel);
      Objects.requireNonNull(tier);
      if (budgetBytes <= 0 || !(memRatio > 0 && memRatio <= 1)) {
        throw new IllegalArgumentException("budget must be positive, memory ratio in (0, 1]");
      }
      if (!swap && !recompute) {
        throw new IllegalArgumentException("allow swapping, recomputation or both");
      }
    }

    /** Options with the built-in tensor policy. */
    public Options(long budgetBytes, double memRatio, CostModel costModel, Tier tier,
        boolean swap, boolean recompute, int pruneLimit, int maxSimulations) {
      this(budgetBytes, memRatio, costModel, tier, swap, recompute, pruneLimit, maxSimulations,
          null);
    }

    /** Swap and recompute, host tier, default cost model, memory ratio 0.8. */
    public static Options of(long budgetBytes) {
      return new Options(budgetBytes, SwapAutoTuner.DEFAULT_MEM_RATIO, CostModel.defaults(),
          Tier.HOST, true, true, 12, 400);
    }

    /** With another memory ratio. */
    public Options withMemRatio(double r) {
      return new Options(budgetBytes, r, costModel, tier, swap, recompute, pruneLimit,
          maxSimulations, policy);
    }

    /** With another cost model. */
    public Options withCostModel(CostModel cm) {
      return new Options(budgetBytes, memRatio, cm, tier, swap, recompute, pruneLimit,
          maxSimulations, policy);
    }

    /** With another tier. */
    public Options withTier(Tier t) {
      return new Options(budgetBytes, memRatio, costModel, t, swap, recompute, pruneLimit,
          maxSimulations, policy);
    }

    /** Swapping only (no recomputation). */
    public Options swapOnly() {
      return new Options(budgetBytes, memRatio, costModel, tier, true, false, pruneLimit,
          maxSimulations, policy);
    }

    /** Recomputation only (no swapping). */
    public Options recomputeOnly() {
      return new Options(budgetBytes, memRatio, costModel, tier, false, true, pruneLimit,
          maxSimulations, policy);
    }

    /** With another tensor policy (null: the built-in rules). */
    public Options withPolicy(TensorPolicy p) {
      return new Options(budgetBytes, memRatio, costModel, tier, swap, recompute, pruneLimit,
          maxSimulations, p);
    }
  }

  /**
   * The plan.
   *
   * @param swaps           what to swap; names refer to the graph with {@code recompute}
   *                        applied (apply the recompute plan first)
   * @param recompute       what to recompute
   * @param needed          false when the graph fits as it is (both plans empty)
   * @param peakBefore      simulated peak of the graph as it is
   * @param predictedPeak   simulated peak with both plans applied
   * @param baseStepMs      predicted step time without LMS
   * @param predictedStepMs predicted step time with both plans
   * @param simulations     simulator runs
   */
  public record Result(SwapPlan swaps, RecomputePlan recompute, boolean needed, long peakBefore,
      long predictedPeak, double baseStepMs, double predictedStepMs, int simulations) {

    /** Predicted time LMS adds to a step, milliseconds. */
    public double overheadMs() {
      return predictedStepMs - baseStepMs;
    }
  }

  private HybridPlanner() {}

  /**
   * Plans {@code g} for the options' budget.
   *
   * @throws PlanningException when no plan the planner finds fits; it names the smallest budget
   *                           that could work (the lowest peak reached, or the lower bound)
   */
  public static Result plan(DataflowGraph g, Options o) {
    TensorPolicy policy = o.policy() != null ? o.policy() : TensorPolicy.builtin(g);
    Result a;
    try {
      a = new HybridSearch(g, o, policy, false).run();
    } catch (PlanningException e) {
      if (!o.swap() || !o.recompute()) {
        throw e;
      }
      // the cheapest-first loop can get stuck where swapping first still fits
      try {
        return new HybridSearch(g, o, policy, true).run();
      } catch (PlanningException e2) {
        throw e2.smallestBudgetBytes() < e.smallestBudgetBytes() ? e2 : e;
      }
    }
    if (!a.needed() || !o.swap() || !o.recompute() || g.size() > HybridSearch.SMALL) {
      return a;
    }
    // a second start on small graphs: swap first, then turn swaps into recomputation where the
    // whole step gets faster (finds runs of recomputed ops next to runs of swapped ones, which
    // the cheapest-first loop interleaves)
    try {
      Result b = new HybridSearch(g, o, policy, true).run();
      LOG.info("[LMS][0] Hybrid starts: cheapest-first {} ms, swap-first {} ms",
          String.format("%.2f", a.predictedStepMs()), String.format("%.2f", b.predictedStepMs()));
      return b.predictedStepMs() < a.predictedStepMs() ? b : a;
    } catch (PlanningException e) {
      return a;
    }
  }
}
