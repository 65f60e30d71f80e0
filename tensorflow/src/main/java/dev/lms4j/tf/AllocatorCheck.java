package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.ResidentLayouts;
import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.PlanningContext;
import dev.lms4j.core.plan.PlanningException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Checks a plan against TensorFlow's allocator before it is accepted: the planners keep the
 * simulated peak (the sum of live bytes) under the budget times the memory ratio, but the BFC
 * allocator hands out whole chunks and grows in regions, so a step can need far more
 * ({@link BfcReplay}: a 49 MiB embedding table holds a 64 MiB chunk). The plan's step is
 * replayed through the allocator model under the whole budget (two steps, the second in the
 * regions the first grew: {@link BfcReplay#STEPS}); when it does not fit, the graph
 * is planned again with the memory ratio lowered by the overshoot (so that the next simulated
 * peak lies below this plan's by it, and by a further {@link #STEP_DOWN} where the last re-plan
 * did not lower the need: fragmentation between whole chunks can keep the need where it was
 * while the live bytes drop), at most {@link #TRIES} plans in all, each logged with its
 * simulated peak and the allocator's need. Where a re-plan aims below the lowest simulated peak
 * the planner can reach, it plans once more, at the ratio where that peak fits (which its
 * refusal names): measured on the zoo's mlp at 19 MiB, the plans at ratios 0.80 and 0.76
 * needed 19 MiB of the allocator, 0.61 was out of reach, and the planner's most thorough plan
 * (every activation swapped, 11.6 MiB simulated) needs 15.
 *
 * <p>A plan is accepted where its replay fits the budget with {@link #HEADROOM} of it to spare,
 * and its chunks in use under the whole budget leave that headroom free too ({@link #accepts}):
 * the replay follows its own order, not the executor's, and places regions as it grows them,
 * so an allocation at the very edge can go either way. Measured on the zoo's mlp (4 x 512,
 * batch 1024): a hybrid plan the replay fitted into exactly 19 MiB ran out of memory at 19 MiB
 * (its traced peak 18.1 MiB under a large budget), though the replay's 6.0 MiB in use before
 * the step matches a traced init's.
 *
 * <p>When none of the planner's plans fits the replay, the alternative planners (the modes a
 * probe would try next) plan at the same budget, each at most {@link #ALTERNATIVE_TRIES} times,
 * and the fastest of their plans the replay accepts is taken. When no plan fits the replay, the
 * graph as given is replayed too: where it fits the whole budget and needs no more than the
 * closest plan, it is left as it was (never worse than TensorFlow). Otherwise the plan the
 * replay found closest is kept ({@link #closest}: of the plans within the headroom of the lowest
 * need, the one with the lowest simulated peak), with a warning naming its need: the allocator
 * model misses kernel scratch the estimates do not know (oneDNN convolutions on some CPUs), so it
 * does not refuse a plan on its own; {@code run} and {@code train} probe the plan before
 * training. Where the closest is no rewrite at all (the planners saw no need, the allocator
 * does, and no plan at a lower ratio came under it), the budget is refused, naming the
 * allocator's need.
 */
final class AllocatorCheck {
  private static final Logger LOG = LoggerFactory.getLogger(AllocatorCheck.class);
  /** Plans at most, the given one included. */
  static final int TRIES = 4;
  /**
   * Plans at most per alternative planner: its first, and one re-plan aimed below by the
   * overshoot (the corpus DenseNet at 26 MiB: tflms's plan at ratio 0.95, 23.9 MiB simulated,
   * needs 36 MiB of the replay; at a lower ratio, 21.9 MiB simulated, 27).
   */
  static final int ALTERNATIVE_TRIES = 2;
  /** The further step down of the memory ratio when a re-plan did not lower the need. */
  private static final double STEP_DOWN = 0.85;
  /** The share of the budget a plan's replay must leave free to be accepted. */
  static final double HEADROOM = 0.05;
  /** The lowest memory ratio a re-plan asks for. */
  private static final double MIN_RATIO = 0.05;

  /**
   * What the check decided.
   *
   * @param plan      the plan to apply (null when the graph is left as given)
   * @param asGiven   true when no plan fits the replay and the graph as given does
   * @param needBytes the allocator's need of the chosen plan (or of the graph as given), bytes
   */
  record Outcome(MemoryPlan plan, boolean asGiven, long needBytes) {}

  private AllocatorCheck() {}

  /**
   * Checks {@code plan} (planned for {@code model} under {@code ctx}), planning again through
   * {@code planner} while the replay does not fit; {@code given} is the graph before any
   * rewrite, replayed when no plan fits.
   */
  static Outcome check(DataflowGraph model, DataflowGraph given, PlanningContext ctx,
      MemoryPlan plan, Function<PlanningContext, MemoryPlan> planner) {
    return check(model, given, ctx, plan, planner, false);
  }

  /**
   * As above; with {@code layouts}, each replay may also create the largest variables last
   * ({@link ResidentLayouts}), as {@link InitOrder} then makes init do.
   */
  static Outcome check(DataflowGraph model, DataflowGraph given, PlanningContext ctx,
      MemoryPlan plan, Function<PlanningContext, MemoryPlan> planner, boolean layouts) {
    return check(model, given, ctx, plan, planner, layouts, StepOrder.levelled());
  }

  /**
   * As above; each plan's step is replayed in {@code steps}'s orders (the orders TensorFlow may
   * run the rewritten graph in: each must fit, and the need is the largest), the graph as given
   * in the levelled schedule.
   */
  static Outcome check(DataflowGraph model, DataflowGraph given, PlanningContext ctx,
      MemoryPlan plan, Function<PlanningContext, MemoryPlan> planner, boolean layouts,
      StepOrder steps) {
    return check(model, given, ctx, plan, planner, layouts, steps, List.of());
  }

  /**
   * As above; where none of {@code planner}'s plans is accepted, each of the
   * {@code alternatives} (other planners, as {@link Lms#alternatives()} names them) plans at
   * the same budget and memory ratio, and once more aimed below where the replay rejects that
   * plan ({@link #ALTERNATIVE_TRIES}); the replay judges their plans too: of those it accepts,
   * the one predicted fastest is taken; else the closest of all plans is kept as before. The
   * planners rank plans by live bytes, the allocator by whole chunks, so another planner's plan
   * can fit where this one's cannot: measured on the corpus DenseNet at 28 MiB, auto's hybrid
   * plans (21.9-22.1 MiB simulated) needed 30 MiB of the allocator in the replay and ran out of
   * memory, while tflms's plan (21.9 MiB) needed 29 and trains.
   */
  static Outcome check(DataflowGraph model, DataflowGraph given, PlanningContext ctx,
      MemoryPlan plan, Function<PlanningContext, MemoryPlan> planner, boolean layouts,
      StepOrder steps, List<Function<PlanningContext, MemoryPlan>> alternatives) {
    long whole = ctx.budget().bytes();
    Search s = search(model, ctx, plan, planner, layouts, steps, TRIES);
    if (s.accepted() != null) {
      return new Outcome(s.accepted(), false, 0);
    }
    MemoryPlan faster = null;
    List<Tried> tried = new ArrayList<>(s.tried());
    for (Function<PlanningContext, MemoryPlan> alternative : alternatives) {
      MemoryPlan p;
      try {
        p = alternative.apply(ctx);
      } catch (PlanningException e) {
        LOG.info("[LMS][0] Allocator replay: an alternative planner has no plan ({})",
            e.getMessage());
        continue;
      }
      if (!p.needed()) {
        continue;
      }
      LOG.info("[LMS][0] Allocator replay: replaying the {} plan (simulated peak {} MiB)",
          p.planner(), String.format("%.1f", p.estimate().peakAfter() / 1048576.0));
      Search a = search(model, ctx, p, alternative, layouts, steps, ALTERNATIVE_TRIES);
      if (a.accepted() != null) {
        MemoryPlan ok = a.accepted();
        if (faster == null || ok.estimate().stepMsAfter() < faster.estimate().stepMsAfter()) {
          faster = ok;
        }
      } else {
        tried.addAll(a.tried());
      }
    }
    if (faster != null) {
      return new Outcome(faster, false, 0);
    }
    Tried closest = closest(tried, whole);
    MemoryPlan best = closest.plan();
    long bestNeed = closest.need();
    long bestLimitNeed = closest.limitNeed();
    long lowestNeed = new Search(null, tried).bestNeed();
    int[] givenOrder = Levels.of(given).schedule();
    if (fits(given, givenOrder, whole, layouts)) {
      long givenNeed = Math.max(needBytes(given, givenOrder, whole, layouts),
          chunksNeed(given, List.of(givenOrder), whole, layouts));
      if (givenNeed <= lowestNeed) {
        LOG.warn("[LMS][0] Allocator replay: no plan leaves {}% of the {} MiB budget free, but "
            + "the graph as given fits it and needs no more: it is left as it was",
            Math.round(HEADROOM * 100), Budget.mib(whole));
        return new Outcome(null, true, givenNeed);
      }
    }
    if (!best.needed() && bestLimitNeed > whole) {
      // the planners saw no need to rewrite, the allocator does, and no plan came under it
      throw new PlanningException("A budget of " + Budget.mib(whole) + " MiB cannot work: the "
          + "graph's live tensors fit it, but TensorFlow's allocator (whole chunks, regions) "
          + "needs about " + Budget.mibUp(bestNeed) + " MiB for it, and no plan at a lower "
          + "memory ratio came under the budget.", bestNeed);
    }
    LOG.warn("[LMS][0] Allocator replay: no plan leaves {}% of the {} MiB budget free; keeping "
        + "the {} plan, which needs about {} MiB of TensorFlow's allocator (the model may miss "
        + "kernel scratch, so a plan is not refused on this alone)", Math.round(HEADROOM * 100),
        Budget.mib(whole), best.needed() ? best.planner() : "no-rewrite", Budget.mibUp(bestNeed));
    return new Outcome(best, false, bestNeed);
  }

  /**
   * The plans {@code planner} makes while the replay does not accept them.
   *
   * @param accepted the plan the replay accepted, or null
   * @param tried    else the plans it did not accept, in the order they were made
   */
  private record Search(MemoryPlan accepted, List<Tried> tried) {
    /** The lowest need of the plans tried, bytes ({@link Long#MAX_VALUE} where none was). */
    long bestNeed() {
      return tried.stream().mapToLong(Tried::need).min().orElse(Long.MAX_VALUE);
    }
  }

  /**
   * A plan the replay did not accept.
   *
   * @param plan      the plan
   * @param need      its need, bytes (chunks in use counted)
   * @param limitNeed the smallest limit its replay fits, bytes
   */
  record Tried(MemoryPlan plan, long need, long limitNeed) {}

  /**
   * The plan to keep of those the replay did not accept: of the plans whose need lies within
   * {@link #HEADROOM} of the budget above the lowest need, the one with the lowest simulated
   * peak. Within the headroom the replay's verdict is not to be trusted (that is why a plan
   * must leave it free), so its ranking there is not either; the live bytes are the other
   * witness. Measured on the corpus GRU at 5 MiB (static swap): four plans needed 5.4-5.9 MiB of
   * the replay; the one it needed least for, hybrid-swap's at 4.0 MiB simulated, ran out of
   * memory allocating 0.6 MiB, while tflms's at 3.5 MiB simulated trains (traced 3.7 MiB).
   */
  static Tried closest(List<Tried> tried, long whole) {
    long lowest = tried.stream().mapToLong(Tried::need).min().orElseThrow();
    long within = lowest + (long) (HEADROOM * whole);
    Tried keep = null;
    for (Tried t : tried) {
      if (t.need() <= within && (keep == null
          || t.plan().estimate().peakAfter() < keep.plan().estimate().peakAfter())) {
        keep = t;
      }
    }
    return keep;
  }

  /**
   * Replays {@code plan}, planning again through {@code planner} at lower memory ratios while
   * the replay does not accept it, {@code tries} plans at most.
   */
  private static Search search(DataflowGraph model, PlanningContext ctx, MemoryPlan plan,
      Function<PlanningContext, MemoryPlan> planner, boolean layouts, StepOrder steps,
      int tries) {
    Budget budget = ctx.budget();
    long whole = budget.bytes();
    long accept = whole - (long) (HEADROOM * whole);
    MemoryPlan current = plan;
    List<Tried> tried = new ArrayList<>();
    long bestNeed = Long.MAX_VALUE;
    double ratio = budget.memRatio();
    // the memory ratio the current plan was made at
    double planRatio = ratio;
    // a plan at the planner's reach was made (once is enough: it is its most thorough)
    boolean reached = false;
    for (int t = 1; t <= tries; t++) {
      DataflowGraph r = current.applyTo(model);
      // every order TensorFlow may run the step in must fit
      List<int[]> orders = steps.forPlan(current).orders(r);
      if (orders.stream().allMatch(o -> accepts(r, o, whole, accept, layouts))) {
        if (t > 1) {
          LOG.info("[LMS][0] Allocator replay: plan {} ({}, memory ratio {}) fits the {} MiB "
              + "budget with {}% to spare", t, current.planner(), String.format("%.2f", ratio),
              Budget.mib(whole), Math.round(HEADROOM * 100));
        }
        return new Search(current, List.of());
      }
      long limitNeed = needBytes(r, orders, whole, layouts);
      long need = Math.max(limitNeed, chunksNeed(r, orders, whole, layouts));
      LOG.info("[LMS][0] Allocator replay: plan {} ({}, simulated peak {} MiB) needs about {} "
          + "MiB of TensorFlow's allocator (whole chunks, regions), more than {} MiB ({}% of the "
          + "{} MiB budget spared)", t, current.needed() ? current.planner() : "no rewrite",
          String.format("%.1f", current.estimate().peakAfter() / 1048576.0),
          String.format("%.1f", need / 1048576.0),
          String.format("%.1f", accept / 1048576.0), Math.round(HEADROOM * 100),
          Budget.mib(whole));
      boolean lower = need < bestNeed;
      bestNeed = Math.min(bestNeed, need);
      tried.add(new Tried(current, need, limitNeed));
      if (t == tries) {
        break;
      }
      // aim the next plan's simulated peak below this one's by the overshoot; where the need
      // did not drop (whole chunks and regions, not live bytes, decide it), step further down
      long simulated = current.estimate().peakAfter();
      ratio = ratio * accept / need;
      if (simulated > 0) {
        ratio = Math.min(ratio, (double) simulated / need);
      }
      if (!lower) {
        ratio *= STEP_DOWN;
      }
      ratio = Math.max(MIN_RATIO, ratio);
      MemoryPlan next = null;
      PlanningException refused = null;
      try {
        next = planner.apply(ctx.withBudget(budget.withMemRatio(ratio)));
      } catch (PlanningException e) {
        refused = e;
      }
      // aimed below what the planner can reach: its most thorough plan, at the ratio where the
      // lowest simulated peak its refusal names fits, may still need less than the plans so far
      double reach = refused != null && !reached && refused.smallestBudgetBytes() > whole
          ? ratio * refused.smallestBudgetBytes() / whole : Double.NaN;
      if (reach < planRatio) {
        LOG.info("[LMS][0] Allocator replay: no plan at memory ratio {}; planning at {}, where "
            + "the planner's lowest simulated peak fits", String.format("%.3f", ratio),
            String.format("%.3f", reach));
        ratio = reach;
        reached = true;
        try {
          next = planner.apply(ctx.withBudget(budget.withMemRatio(ratio)));
        } catch (PlanningException e) {
          refused = e;
        }
      }
      if (next == null) {
        LOG.info("[LMS][0] Allocator replay: no plan at memory ratio {} ({})",
            String.format("%.2f", ratio), refused.getMessage());
        break;
      }
      current = next;
      planRatio = ratio;
    }
    return new Search(null, tried);
  }

  /**
   * True when a step of {@code g} as it is fits the allocator model under {@code budget} (with
   * {@code layouts}: in the graph's order or in one of {@link ResidentLayouts}).
   */
  static boolean fits(DataflowGraph g, long budget, boolean layouts) {
    return fits(g, Levels.of(g).schedule(), budget, layouts);
  }

  /**
   * True when a step of {@code g} in {@code order} is accepted under a budget of {@code whole}:
   * its replay fits {@code accept} (the budget less the headroom), and replayed under the whole
   * budget, as TensorFlow will run it, the chunks it holds never come within the headroom of the
   * limit. Both are needed: a smaller limit cuts the last region, but where a large tensor holds
   * a whole chunk of it (under twice its size) at either limit, the rest of the step shares the
   * same earlier regions at both, and only the chunks in use show how little room it has left.
   * Measured on the corpus encoder (framework Adam): swap's plan for 58 MiB (46.3 MiB simulated)
   * fitted the replay at 55 MiB but held 57.3 MiB of chunks at 58 (a 15.6 MiB tensor whole in the
   * 28 MiB region); TensorFlow ran out of memory at 58 with 57.5 MiB of chunks in use and 488 KiB
   * free for a 512 KiB request. The same happened to the plans for 55 and 61 MiB, where the plans
   * for 52 and 64 trained.
   */
  private static boolean accepts(DataflowGraph g, int[] order, long whole, long accept,
      boolean layouts) {
    BfcReplay.Layout l = fitting(g, order, accept, layouts);
    if (l == null) {
      return false;
    }
    BfcReplay.Result r = BfcReplay.replay(g, order, whole, l);
    return r.fits() && r.peakInUse() <= accept;
  }

  /**
   * The budget whose headroom the chunks a step of {@code g} holds under {@code whole} would
   * leave free (their peak over one less the headroom), bytes; 0 where the replay under
   * {@code whole} does not fit (its need is {@link #needBytes} then).
   */
  private static long chunksNeed(DataflowGraph g, List<int[]> orders, long whole,
      boolean layouts) {
    long need = 0;
    for (int[] o : orders) {
      BfcReplay.Layout l = layouts ? ResidentLayouts.fitting(g, o, whole)
          : BfcReplay.Layout.GRAPH_ORDER;
      if (l == null) {
        continue;
      }
      BfcReplay.Result r = BfcReplay.replay(g, o, whole, l);
      if (r.fits()) {
        need = Math.max(need, (long) Math.ceil(r.peakInUse() / (1 - HEADROOM)));
      }
    }
    return need;
  }

  private static boolean fits(DataflowGraph g, int[] order, long budget, boolean layouts) {
    return fitting(g, order, budget, layouts) != null;
  }

  /**
   * The layout in which a step of {@code g} in {@code order} fits {@code budget}: the graph's
   * order where it fits, else (with {@code layouts}) one of {@link ResidentLayouts}; null where
   * none does.
   */
  private static BfcReplay.Layout fitting(DataflowGraph g, int[] order, long budget,
      boolean layouts) {
    if (layouts) {
      return ResidentLayouts.fitting(g, order, budget);
    }
    return BfcReplay.replay(g, order, budget).fits() ? BfcReplay.Layout.GRAPH_ORDER : null;
  }

  /** The smallest budget a step of {@code g} as it is fits the allocator model under, bytes. */
  static long needBytes(DataflowGraph g, long budget, boolean layouts) {
    return needBytes(g, Levels.of(g).schedule(), budget, layouts);
  }

  /** As above, with a step of {@code g} run in {@code steps}'s order. */
  static long needBytes(DataflowGraph g, long budget, boolean layouts, StepOrder steps) {
    return needBytes(g, steps.orders(g), budget, layouts);
  }

  /** The largest of the needs of a step of {@code g} in each of {@code orders}, bytes. */
  private static long needBytes(DataflowGraph g, List<int[]> orders, long whole,
      boolean layouts) {
    long need = 0;
    for (int[] o : orders) {
      need = Math.max(need, needBytes(g, o, whole, layouts));
    }
    return need;
  }

  /** The smallest budget the replay fits, bytes (up to 4x {@code whole}; beyond: 4x). */
  private static long needBytes(DataflowGraph g, int[] order, long whole, boolean layouts) {
    long maxMib = Math.max(1, (4 * whole) >> 20);
    if (layouts) {
      ResidentLayouts.Choice c = ResidentLayouts.best(g, order, whole, maxMib);
      return c == null ? maxMib << 20 : c.needBytes();
    }
    long mib = BfcReplay.smallestMib(g, order, maxMib);
    return mib < 0 ? maxMib << 20 : mib << 20;
  }

  /**
   * The layout {@link InitOrder} should give init so that a step of {@code g} fits
   * {@code budget}: null where the graph's own order fits it with the headroom to spare; else
   * the layout with the most room for the step ({@link ResidentLayouts#roomiest}) of those that
   * fit the budget less the headroom; else, where the graph's order does not fit the whole
   * budget either, of those that fit the whole budget; else null where the graph's order fits;
   * else the layout that needs the least. The headroom is for the init temporaries the replay
   * does not lay out: on the corpus embedding-sparse, an 8 MiB primer made first is replayed into
   * 57 MiB and ran out of memory creating the table at 57 and 58 (init grew another region); at
   * 60 and 62 it trained with 4.7 MiB to spare. And where the graph as given fits the whole
   * budget, a layout that does not leave the headroom is not worth the risk: embedding-dense
   * without its sparse update, at TensorFlow's own minimum (118 MiB, which the replay fits), ran
   * out of memory with a 4 MiB primer made first that the replay fitted into 117.
   */
  static ResidentLayouts.Choice layout(DataflowGraph g, long budget) {
    return layout(g, budget, StepOrder.levelled());
  }

  /** As above, with a step of {@code g} run in {@code steps}'s order. */
  static ResidentLayouts.Choice layout(DataflowGraph g, long budget, StepOrder steps) {
    int[] order = steps.worst(g, Math.max(1, (4 * budget) >> 20));
    long accept = budget - (long) (HEADROOM * budget);
    if (BfcReplay.replay(g, order, accept).fits()) {
      return null;
    }
    long maxMib = Math.max(1, (4 * budget) >> 20);
    boolean givenFits = BfcReplay.replay(g, order, budget).fits();
    BfcReplay.Layout l = ResidentLayouts.roomiest(g, order, accept);
    if (l == null && !givenFits) {
      // where the graph's order fits the whole budget, a layout must leave the headroom it
      // does not: within it the replay's error decides
      l = ResidentLayouts.roomiest(g, order, budget);
    }
    if (l != null) {
      return new ResidentLayouts.Choice(l, BfcReplay.smallestMib(g, order, maxMib, l) << 20);
    }
    if (givenFits) {
      return null;
    }
    ResidentLayouts.Choice best = ResidentLayouts.best(g, order, budget, maxMib);
    return best == null || best.layout().isGraphOrder() ? null : best;
  }
}
