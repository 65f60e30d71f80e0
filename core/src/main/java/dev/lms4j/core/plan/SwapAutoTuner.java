package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.graph.Levels;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * TFLMS's auto-tuning: simulate the graph against the budget and search the parameters left at
 * -1, in TFLMS's order.
 *
 * <ol>
 *   <li>When the graph fits without LMS: "LMS is not necessary", an empty plan.</li>
 *   <li>{@code swapout_threshold}: if threshold 1 fits, the largest fitting threshold in
 *       {@code [1, levels]} (binary search); if not, {@code sync_mode} is raised (up to 3) and
 *       tried again.</li>
 *   <li>{@code swapin_ahead} (asynchronous swap-in only): the largest fitting value in
 *       {@code [1, levels]}, else {@code sync_mode} 3.</li>
 *   <li>{@code swapin_groupby} (asynchronous swap-in only): all consumers in one group if that
 *       fits, else the first fitting value of a binary search over {@code [0, levels]}.</li>
 * </ol>
 *
 * The simulated peak must stay under {@code budget * memRatio}: the ratio (default 0.8) is the
 * margin for fragmentation and kernel scratch memory the simulator does not see.
 */
public final class SwapAutoTuner {
  private static final Logger LOG = LoggerFactory.getLogger(SwapAutoTuner.class);

  /**
   * lms4j's default simulator memory ratio. TFLMS used 0.9 on GPUs; here the BFC allocator with
   * oneDNN kernels needed about 10% more than the traced peak (kernel scratch buffers are not in
   * the trace, and fragmentation grows near the limit), so the default leaves 20%.
   */
  public static final double DEFAULT_MEM_RATIO = Budget.DEFAULT_MEM_RATIO;

  private final DataflowGraph graph;
  private final PlanSimulator sim;
  private final long available;
  private final TensorPolicy policy;
  private int simulations;
  private long bestPeak = Long.MAX_VALUE;

  private SwapAutoTuner(DataflowGraph graph, long available, TensorPolicy policy) {
    this.graph = graph;
    this.policy = policy;
    this.sim = new PlanSimulator(graph);
    this.available = available;
  }

  /**
   * The outcome of tuning.
   *
   * @param plan          the plan (empty when LMS is not necessary)
   * @param lmsNeeded     false when the graph fits without LMS
   * @param predictedPeak simulated peak of the planned graph
   * @param simulations   number of simulator runs
   */
  public record Result(SwapPlan plan, boolean lmsNeeded, long predictedPeak, int simulations) {}

  /**
   * Plans for {@code budgetBytes}, tuning the parameters that are -1 (all of them or some).
   *
   * @throws PlanningException when no parameter set fits; its message names the smallest budget
   *                           that could work
   */
  public static Result tune(DataflowGraph g, SwapParams p, long budgetBytes, double memRatio) {
    return tune(g, p, TensorPolicy.of(g, TensorPolicy.Spec.from(p)),
        new Budget(budgetBytes, memRatio));
  }

  /**
   * Plans for {@code budget}, tuning the parameters that are -1; what may be swapped comes from
   * {@code policy}.
   *
   * @throws PlanningException when no parameter set fits
   */
  public static Result tune(DataflowGraph g, SwapParams p, TensorPolicy policy, Budget budget) {
    SwapAutoTuner t = new SwapAutoTuner(g, budget.limit(), policy);
    return t.run(p, budget.bytes(), budget.memRatio());
  }

  /** Simulated peak of {@code g} rewritten with {@code plan}. */
  public static long simulatePeak(DataflowGraph g, SwapPlan plan) {
    DataflowGraph r = PlanApplier.apply(g, plan);
    MemoryProfile prof = MemorySimulator.simulate(r, Levels.of(r).schedule());
    return prof.peakBytes();
  }

  private Result run(SwapParams p, long budgetBytes, double memRatio) {
    int levels = Levels.of(graph).count();
    long noLms = sim.peak(SwapPlan.empty(p));
    simulations++;
    LOG.info("[LMS][0] Available memory for simulation: {} MiB (memory ratio: {})",
        mib(available), memRatio);
    if (p.autoTune() && noLms <= available) {
      LOG.info("[LMS][0] LMS is not necessary. Turned LMS off. (simulated peak {} MiB)",
          mib(noLms));
      return new Result(SwapPlan.empty(p), false, noLms, simulations);
    }
    bestPeak = noLms;
    if (!p.autoTune() && p.swapoutThreshold() >= 0 && p.swapinGroupby() >= 0
        && (p.swapinAhead() >= 1 || p.syncMode() >= 2)) {
      SwapPlan plan = TflmsSwapPlanner.plan(graph, p, policy);
      return new Result(plan, true, sim.peak(plan), simulations + 1);
    }
    LOG.info("[LMS][0] Searching values for parameters: swapout_threshold, swapin_ahead, "
        + "swapin_groupby and sync_mode.");
    int sm = p.syncMode();
    int th = p.swapoutThreshold();
    int ah = p.swapinAhead() < 0 ? 1 : p.swapinAhead();
    int gb = p.swapinGroupby() < 0 ? 0 : p.swapinGroupby();
    if (th < 0) {
      while (true) {
        if (fits(p, 1, ah, gb, sm)) {
          final int fsm = sm;
          final int fah = ah;
          final int fgb = gb;
          th = largest(1, levels, v -> fits(p, v, fah, fgb, fsm));
          break;
        } else if (sm < 3) {
          sm++;
        } else {
          throw impossible(budgetBytes, memRatio);
        }
      }
    } else if (!fits(p, th, ah, gb, sm)) {
      throw impossible(budgetBytes, memRatio);
    }
    if (sm < 2 && p.swapinAhead() < 0) {
      final int fth = th;
      final int fgb = gb;
      final int fsm = sm;
      ah = largest(1, levels, v -> fits(p, fth, v, fgb, fsm));
    }
    if (sm < 2 && p.swapinGroupby() < 0) {
      if (fits(p, th, ah, levels, sm)) {
        gb = levels;
      } else {
        final int fth = th;
        final int fah = ah;
        final int fsm = sm;
        gb = firstFitting(0, levels, v -> fits(p, fth, fah, v, fsm));
      }
    }
    SwapParams chosen = p.toBuilder().swapoutThreshold(th).swapinAhead(ah).swapinGroupby(gb)
        .syncMode(sm).build();
    SwapPlan plan = TflmsSwapPlanner.plan(graph, chosen, policy);
    long peak = sim.peak(plan);
    simulations++;
    LOG.info("[LMS][0] Found a parameter set: swapout_threshold {}, swapin_ahead {}, "
        + "swapin_groupby {}, sync_mode {} (simulated peak {} MiB, {} simulations)", th, ah, gb,
        sm, mib(peak), simulations);
    return new Result(plan, true, peak, simulations);
  }

  private boolean fits(SwapParams p, int th, int ah, int gb, int sm) {
    SwapParams q = p.toBuilder().swapoutThreshold(th).swapinAhead(ah).swapinGroupby(gb)
        .syncMode(sm).build();
    long peak = sim.peak(TflmsSwapPlanner.plan(graph, q, policy));
    simulations++;
    bestPeak = Math.min(bestPeak, peak);
    return peak <= available;
  }

  /** Largest v in [lo, hi] with ok(v), assuming ok(lo) holds and ok is monotone decreasing. */
  private static int largest(int lo, int hi, java.util.function.IntPredicate ok) {
    int best = lo;
    int l = lo + 1;
    int r = hi;
    while (l <= r) {
      int m = (l + r) >>> 1;
      if (ok.test(m)) {
        best = m;
        l = m + 1;
      } else {
        r = m - 1;
      }
    }
    return best;
  }

  /** TFLMS's early-stopping search: the first midpoint that passes, else {@code lo}. */
  private static int firstFitting(int lo, int hi, java.util.function.IntPredicate ok) {
    int l = lo;
    int r = hi;
    while (l <= r) {
      int m = (l + r) >>> 1;
      if (ok.test(m)) {
        return m;
      }
      r = m - 1;
    }
    return lo;
  }

  private PlanningException impossible(long budgetBytes, double memRatio) {
    long need = (long) Math.ceil(bestPeak / memRatio);
    return new PlanningException("No swap parameters fit a budget of " + mib(budgetBytes)
        + " MiB: the smallest simulated peak was " + mib(bestPeak) + " MiB. The smallest budget "
        + "that could work is about " + mibUp(need) + " MiB.", need);
  }

  static long mib(long bytes) {
    return bytes >> 20;
  }

  static long mibUp(long bytes) {
    return (bytes + (1 << 20) - 1) >> 20;
  }
}
