package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.PlanningContext;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TflmsSwapPlanner;
import dev.lms4j.core.plan.TensorPolicy;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The allocator check of an accepted plan: re-plans at a lower memory ratio while the replay
 * does not fit the whole budget, leaves the graph as given where only that fits, and never
 * refuses on its own. Graphs: a 40 MiB variable and a 30 MiB activation need 94 MiB of the BFC
 * allocator (a 64 MiB region for the variable, see {@code BfcReplayTest}); with a second 30 MiB
 * activation alive at once, 124 MiB (the ops are matmuls: an element-wise op would write into
 * its input's buffer, which the replay models).
 */
class AllocatorCheckTest {

  /**
   * The init layout for a 40 MiB table created first, a 512 KiB weight and a small step (the
   * graph's order needs 66 MiB, the table created last 42): at 70 MiB the graph's order leaves
   * the 5% headroom and is kept; at 66 it fits only without it, so a layout is taken that leaves
   * it (the most room beside the table: a 16 MiB primer just before it, 18 MiB of regions, the
   * table's cut to 44.7 of 62.7); at 45 only the table created last without a primer leaves 5%.
   */
  @Test
  void theInitLayoutLeavesTheHeadroomOrKeepsTheGraphsOrder() {
    long mib = 1 << 20;
    DataflowGraph g = DataflowGraph.builder()
        .op("table", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(40 * mib))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(512 * 1024))
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(64 * 1024))
        .op("lookup", "GatherV2", OpCategory.FORWARD, List.of("table", "x"),
            Tensor.ofBytes(512 * 1024))
        .op("a", "MatMul", OpCategory.FORWARD, List.of("lookup", "w"), Tensor.ofBytes(64 * 1024))
        .build();
    int table = g.op("table").orElseThrow().id();
    assertThat(AllocatorCheck.layout(g, 70 * mib)).isNull();
    var at66 = AllocatorCheck.layout(g, 66 * mib);
    assertThat(at66.layout().last()).containsExactly(table);
    assertThat(at66.layout().primerBytes()).isEqualTo(16 * mib);
    assertThat(at66.layout().primerFirst()).isFalse();
    assertThat(at66.needBytes()).isLessThanOrEqualTo((long) (0.95 * 66 * mib));
    var at45 = AllocatorCheck.layout(g, 45 * mib);
    assertThat(at45.layout().last()).containsExactly(table);
    assertThat(at45.layout().primerBytes()).isZero();
    assertThat(at45.needBytes()).isEqualTo(42 * mib);
  }
  private static final long MIB = 1 << 20;

  private static DataflowGraph small() {
    return DataflowGraph.builder()
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(40 * MIB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("w"), Tensor.ofBytes(30 * MIB))
        .build();
  }

  private static DataflowGraph large() {
    return DataflowGraph.builder()
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(40 * MIB))
        .op("a", "MatMul", OpCategory.FORWARD, List.of("w"), Tensor.ofBytes(30 * MIB))
        .op("b", "MatMul", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(30 * MIB))
        .build();
  }

  private static MemoryPlan unchanged(DataflowGraph g, PlanningContext ctx) {
    return MemoryPlan.unchanged("test", g, ctx, 0);
  }

  @Test
  void aPlanWhoseReplayFitsIsKeptWithoutPlanningAgain() {
    DataflowGraph g = small();
    PlanningContext ctx = PlanningContext.of(Budget.of(124 * MIB), TensorPolicy.builtin(g));
    MemoryPlan plan = unchanged(g, ctx);
    List<Double> ratios = new ArrayList<>();
    AllocatorCheck.Outcome o = AllocatorCheck.check(g, g, ctx, plan, c -> {
      ratios.add(c.budget().memRatio());
      return unchanged(g, c);
    });
    assertThat(o.plan()).isSameAs(plan);
    assertThat(o.asGiven()).isFalse();
    assertThat(ratios).isEmpty();
  }

  @Test
  void whenNoPlanFitsButTheGraphAsGivenDoesItIsLeftAsItWas() {
    DataflowGraph model = large();
    DataflowGraph given = small();
    PlanningContext ctx = PlanningContext.of(Budget.of(100 * MIB), TensorPolicy.builtin(model));
    List<Double> ratios = new ArrayList<>();
    AllocatorCheck.Outcome o = AllocatorCheck.check(model, given, ctx, unchanged(model, ctx),
        c -> {
          ratios.add(c.budget().memRatio());
          return unchanged(model, c);
        });
    assertThat(o.asGiven()).isTrue();
    assertThat(o.plan()).isNull();
    // its replay fits 94 MiB, but under the whole budget it holds all of it (a whole chunk)
    assertThat(o.needBytes()).isEqualTo(keeping(100 * MIB));
    // more plans, each at the ratio lowered by the overshoot over the 95 MiB a plan may take
    // (5% of the budget spared): 0.8 x 95/124, then again
    assertThat(ratios).hasSize(AllocatorCheck.TRIES - 1);
    assertThat(ratios.get(0)).isCloseTo(0.8 * 95 / 124, offset(1e-9));
    assertThat(ratios.get(1)).isLessThan(ratios.get(0));
  }

  /**
   * Of the plans the replay rejects, the one kept is the lowest simulated peak among those
   * within the headroom (5% of the budget) of the lowest need: there the replay's ranking is
   * within its own error. A plan further above is not kept, however low its simulated peak.
   */
  @Test
  void theClosestIsTheLowestSimulatedPeakWithinTheHeadroomOfTheLowestNeed() {
    DataflowGraph g = chain();
    PlanningContext ctx = PlanningContext.of(Budget.of(40 * MIB), TensorPolicy.builtin(g));
    MemoryPlan a = MemoryPlan.unchanged("a", g, ctx, 30 * MIB);
    MemoryPlan b = MemoryPlan.unchanged("b", g, ctx, 20 * MIB);
    MemoryPlan c = MemoryPlan.unchanged("c", g, ctx, 10 * MIB);
    long h = (long) (0.05 * 40 * MIB);
    List<AllocatorCheck.Tried> tried = List.of(new AllocatorCheck.Tried(a, 50 * MIB, 50 * MIB),
        new AllocatorCheck.Tried(b, 50 * MIB + h, 50 * MIB),
        new AllocatorCheck.Tried(c, 50 * MIB + h + 1, 50 * MIB));
    assertThat(AllocatorCheck.closest(tried, 40 * MIB).plan()).isSameAs(b);
    assertThat(AllocatorCheck.closest(tried.subList(0, 1), 40 * MIB).plan()).isSameAs(a);
    // a tie in need: the lower simulated peak, whichever came first
    assertThat(AllocatorCheck.closest(List.of(new AllocatorCheck.Tried(b, 50 * MIB, 0),
        new AllocatorCheck.Tried(c, 50 * MIB, 0)), 40 * MIB).plan()).isSameAs(c);
  }

  /**
   * Through the check: the same swaps planned again with a lower simulated peak need what the
   * first plan needed (the same graph), so the re-plan is the one kept (the first was, before:
   * a re-plan replaced the kept plan only where it needed strictly less).
   */
  @Test
  void whenPlansTieInNeedTheLowerSimulatedPeakIsKept() {
    DataflowGraph g = chain();
    PlanningContext ctx = PlanningContext.of(Budget.of(40 * MIB), TensorPolicy.builtin(g));
    SwapPlan swaps = tflmsSwapsAtThresholdOne(g);
    MemoryPlan first = MemoryPlan.of("first", g, RecomputePlan.empty(), swaps, 0, 30 * MIB, 0,
        ctx);
    MemoryPlan lower = MemoryPlan.of("lower", g, RecomputePlan.empty(), swaps, 0, 20 * MIB, 0,
        ctx);
    AllocatorCheck.Outcome o = AllocatorCheck.check(g, g, ctx, first, c -> lower);
    assertThat(o.plan()).isSameAs(lower);
    assertThat(o.needBytes()).isGreaterThan(40 * MIB);
  }

  /** A plan (a swap) the replay rejects is kept, not refused: the model may miss scratch. */
  @Test
  void whenNothingFitsTheClosestPlanIsKeptAndTheBudgetIsNotRefused() {
    DataflowGraph g = chain();
    PlanningContext ctx = PlanningContext.of(Budget.of(40 * MIB), TensorPolicy.builtin(g));
    SwapPlan swaps = tflmsSwapsAtThresholdOne(g);
    assertThat(swaps.isEmpty()).isFalse();
    MemoryPlan plan = MemoryPlan.of("test", g, RecomputePlan.empty(), swaps, 0, 0, 0, ctx);
    List<Double> ratios = new ArrayList<>();
    AllocatorCheck.Outcome o = AllocatorCheck.check(g, g, ctx, plan, c -> {
      ratios.add(c.budget().memRatio());
      throw new PlanningException("no plan at this ratio", 200 * MIB);
    });
    assertThat(o.plan()).isSameAs(plan);
    assertThat(o.asGiven()).isFalse();
    assertThat(o.needBytes()).isGreaterThan(40 * MIB);
    assertThat(ratios).hasSize(1);
    assertThat(ratios.get(0)).isCloseTo(0.8 * 38 * MIB / o.needBytes(), offset(1e-9));
  }

  /**
   * No rewrite that the replay rejects, and nothing better at a lower ratio: refused, naming
   * the allocator's need (94 MiB), rather than handing back a graph that needs more.
   */
  @Test
  void noRewriteTheReplayRejectsIsRefusedNamingTheAllocatorsNeed() {
    DataflowGraph g = small();
    PlanningContext ctx = PlanningContext.of(Budget.of(90 * MIB), TensorPolicy.builtin(g));
    List<Double> ratios = new ArrayList<>();
    assertThatThrownBy(() -> AllocatorCheck.check(g, g, ctx, unchanged(g, ctx), c -> {
      ratios.add(c.budget().memRatio());
      throw new PlanningException("no plan at this ratio", 200 * MIB);
    })).isInstanceOfSatisfying(PlanningException.class, e -> {
      assertThat(e.smallestBudgetBytes()).isEqualTo(94 * MIB);
      assertThat(e.getMessage()).contains("about 94 MiB");
    });
    assertThat(ratios).hasSize(1);
    assertThat(ratios.get(0)).isCloseTo(0.8 * 85.5 / 94, offset(1e-9));
  }

  /**
   * Each re-plan aims its simulated peak below the last plan's by the overshoot, and steps a
   * further 15% down where the need did not drop: the large graph needs 124 MiB of a 100 MiB
   * budget whatever the plans' simulated peaks say (here 50 MiB, so the first re-plan aims at
   * 50 x 95/124 MiB, not at 0.8 x 95/124 of the budget).
   */
  @Test
  void aReplanAimsBelowTheLastPlansSimulatedPeakAndStepsDownWhereTheNeedStays() {
    DataflowGraph model = large();
    PlanningContext ctx = PlanningContext.of(Budget.of(100 * MIB), TensorPolicy.builtin(model));
    List<Double> ratios = new ArrayList<>();
    // no rewrite came under the budget: refused with the allocator's need
    assertThatThrownBy(() -> AllocatorCheck.check(model, large(), ctx,
        MemoryPlan.unchanged("test", model, ctx, 50 * MIB), c -> {
          ratios.add(c.budget().memRatio());
          return MemoryPlan.unchanged("test", model, c, 50 * MIB);
        })).isInstanceOfSatisfying(PlanningException.class,
            e -> assertThat(e.smallestBudgetBytes()).isEqualTo(124 * MIB));
    assertThat(ratios).hasSize(AllocatorCheck.TRIES - 1);
    // plan 1 at 0.8: simulated 50, need 124 -> 50/124 (below 0.8 x 95/124)
    assertThat(ratios.get(0)).isCloseTo(50.0 / 124, offset(1e-9));
    // the need stayed at 124: the ratio lowered by the overshoot over the 95 MiB a plan may
    // take (5% of the budget spared), then by 0.85
    assertThat(ratios.get(1)).isCloseTo(50.0 / 124 * 95 / 124 * 0.85, offset(1e-9));
    assertThat(ratios.get(2)).isCloseTo(ratios.get(1) * 95 / 124 * 0.85, offset(1e-9));
  }

  /**
   * Where no plan leaves the headroom but the closest one needs less than the graph as given,
   * the plan is kept. At 100 MiB the plan's 64 MiB variable takes a region of its size, and its
   * three activations (18, 9 and 4.5 MiB, alive together) split the 36 MiB region left (each at
   * most half of what remains): 95.5 MiB in use, just inside the headroom. The given graph (a
   * 40 MiB variable, a 30 MiB activation) fits too, but holds all 100 MiB (both whole chunks).
   */
  @Test
  void aPlanInsideTheHeadroomIsKeptOverAGivenGraphThatNeedsMore() {
    DataflowGraph model = DataflowGraph.builder()
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(64 * MIB))
        .op("b", "MatMul", OpCategory.FORWARD, List.of("w"), Tensor.ofBytes(18 * MIB))
        .op("c", "MatMul", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(9 * MIB))
        .op("d", "MatMul", OpCategory.FORWARD, List.of("b", "c"), Tensor.ofBytes(9 * MIB / 2))
        .build();
    DataflowGraph given = small();
    long budget = 100 * MIB;
    assertThat(AllocatorCheck.fits(given, budget, false)).isTrue();
    assertThat(BfcReplay.replay(model, levelled(model), budget)
        .peakInUse()).isEqualTo(95 * MIB + MIB / 2);
    assertThat(BfcReplay.replay(given, levelled(given), budget)
        .peakInUse()).isEqualTo(budget);
    PlanningContext ctx = PlanningContext.of(Budget.of(budget), TensorPolicy.builtin(model));
    MemoryPlan plan = MemoryPlan.unchanged("test", model, ctx, 0);
    AllocatorCheck.Outcome o = AllocatorCheck.check(model, given, ctx, plan,
        c -> MemoryPlan.unchanged("test", model, c, 0));
    assertThat(o.asGiven()).isFalse();
    assertThat(o.plan()).isSameAs(plan);
    assertThat(o.needBytes()).isEqualTo(keeping(95 * MIB + MIB / 2));
  }

  /** The budget whose headroom {@code bytes} of chunks in use leave free. */
  private static long keeping(long bytes) {
    return (long) Math.ceil(bytes / (1 - AllocatorCheck.HEADROOM));
  }

  /**
   * A re-plan aimed below what the planner can reach (here: a simulated peak of 35 MiB, refused
   * below ratio 0.35 of the 100 MiB budget, naming the budget that would do) is made once more
   * at the ratio where that peak fits, once, and never at or above the ratio of the plan before.
   */
  @Test
  void aReplanOutOfThePlannersReachPlansAtTheRatioItsRefusalNames() {
    DataflowGraph model = large();
    PlanningContext ctx = PlanningContext.of(Budget.of(100 * MIB), TensorPolicy.builtin(model));
    List<Double> ratios = new ArrayList<>();
    assertThatThrownBy(() -> AllocatorCheck.check(model, large(), ctx,
        MemoryPlan.unchanged("test", model, ctx, 50 * MIB), c -> {
          double r = c.budget().memRatio();
          ratios.add(r);
          if (r < 0.35 - 1e-9) {
            throw new PlanningException("lowest simulated peak 35 MiB",
                (long) Math.ceil(35 * MIB / r));
          }
          return MemoryPlan.unchanged("test", model, c, 50 * MIB);
        })).isInstanceOf(PlanningException.class);
    // 50/124, then below 0.35 (refused), then at 0.35 (planned), then below again: refused,
    // and the planner's reach was tried already, so no fifth plan
    assertThat(ratios).hasSize(4);
    assertThat(ratios.get(0)).isCloseTo(50.0 / 124, offset(1e-9));
    assertThat(ratios.get(1)).isLessThan(0.35);
    assertThat(ratios.get(2)).isCloseTo(0.35, offset(1e-6));
    assertThat(ratios.get(3)).isLessThan(0.35);
  }

  /**
   * A plan is accepted where its replay leaves 5% of the budget free: the small graph needs 94
   * MiB, which fits a 98 MiB budget but not its 93.1 MiB after the headroom, so the plan is
   * planned again; no plan comes under, and the graph as given (replayed against the whole
   * budget: never worse than TensorFlow) is left as it was. At 124 MiB it is kept at once.
   */
  @Test
  void aPlanWhoseReplayLeavesLessThanTheHeadroomIsPlannedAgain() {
    DataflowGraph g = small();
    PlanningContext ctx = PlanningContext.of(Budget.of(98 * MIB), TensorPolicy.builtin(g));
    List<Double> ratios = new ArrayList<>();
    AllocatorCheck.Outcome o = AllocatorCheck.check(g, g, ctx, unchanged(g, ctx), c -> {
      ratios.add(c.budget().memRatio());
      return unchanged(g, c);
    });
    assertThat(AllocatorCheck.HEADROOM).isEqualTo(0.05);
    assertThat(ratios).isNotEmpty();
    assertThat(o.asGiven()).isTrue();
    assertThat(o.needBytes()).isEqualTo(keeping(98 * MIB));

    PlanningContext roomy = PlanningContext.of(Budget.of(124 * MIB), TensorPolicy.builtin(g));
    MemoryPlan plan = unchanged(g, roomy);
    assertThat(AllocatorCheck.check(g, g, roomy, plan, c -> {
      throw new AssertionError("planned again at " + c.budget());
    }).plan()).isSameAs(plan);
  }

  /**
   * The headroom holds for the chunks in use under the whole budget too. At 100 MiB the small
   * graph's variable takes a 64 MiB region whole and its 30 MiB activation the 36 MiB left, whole
   * (under twice its size): all 100 MiB in use, where TensorFlow would have nothing left for any
   * other request. Replayed under the 95 MiB the headroom leaves, the activation's region is 31
   * MiB and it fits: the smaller limit alone does not show it. The plan is planned again, aiming
   * at the budget those chunks would leave 5% of (100 / 0.95 MiB); with the region 60 MiB or
   * more (a 124 MiB budget), the activation's chunk is split and 94 MiB are in use.
   */
  @Test
  void aPlanWhoseChunksInUseUnderTheWholeBudgetLeaveLessThanTheHeadroomIsPlannedAgain() {
    DataflowGraph g = small();
    assertThat(BfcReplay.replay(g, levelled(g), 95 * MIB).fits()).isTrue();
    assertThat(BfcReplay.replay(g, levelled(g), 100 * MIB).peakInUse())
        .isEqualTo(100 * MIB);
    PlanningContext ctx = PlanningContext.of(Budget.of(100 * MIB), TensorPolicy.builtin(g));
    List<Double> ratios = new ArrayList<>();
    AllocatorCheck.Outcome o = AllocatorCheck.check(g, g, ctx, unchanged(g, ctx), c -> {
      ratios.add(c.budget().memRatio());
      return unchanged(g, c);
    });
    assertThat(ratios).isNotEmpty();
    assertThat(ratios.get(0)).isCloseTo(0.8 * 95 / (100 / 0.95), offset(1e-3));
    // no plan comes under, and the graph as given fits the whole budget: left as it was
    assertThat(o.asGiven()).isTrue();
    assertThat(BfcReplay.replay(g, levelled(g), 124 * MIB).peakInUse())
        .isEqualTo(94 * MIB);
  }

  /** The training chain of the alternatives' cases: six 16 MiB activations, 64 KiB weights. */
  private static DataflowGraph chain() {
    return SyntheticGraphs.trainingChain(6, 16 * MIB, 64 << 10);
  }

  /** TFLMS's swaps of {@code g} at threshold 1, swap-in 1 ahead, no grouping. */
  private static SwapPlan tflmsSwapsAtThresholdOne(DataflowGraph g) {
    return TflmsSwapPlanner.plan(g, SwapParams.builder().swapoutThreshold(1).swapinAhead(1)
        .swapinGroupby(0).syncMode(0).build());
  }

  /** TFLMS's swaps of {@code g} with the given parameters, as a plan. */
  private static MemoryPlan swapping(DataflowGraph g, PlanningContext ctx, int threshold,
      int ahead, int groupby) {
    SwapPlan swaps = TflmsSwapPlanner.plan(g, SwapParams.builder().swapoutThreshold(threshold)
        .swapinAhead(ahead).swapinGroupby(groupby).syncMode(0).build());
    assertThat(swaps.isEmpty()).isFalse();
    return MemoryPlan.of("swap " + threshold + "/" + ahead + "/" + groupby, g,
        RecomputePlan.empty(), swaps, 0, 0, 0, ctx);
  }

  /**
   * Where none of the planner's plans is accepted, the alternatives plan once each at the same
   * budget and ratio, and the fastest of those the replay accepts is taken. The training chain
   * (six 16 MiB activations) needs 144 MiB of the allocator as given; swapped with its swap-ins
   * two ops ahead 128, one op ahead 96. At 110 MiB the planner's plan (two ahead) is rejected at
   * every ratio; of the two alternatives whose plans need 96, the one predicted faster wins, and
   * an alternative that refuses the budget is passed over.
   */
  @Test
  void whereNoPlanIsAcceptedTheFastestAlternativePlanTheReplayAcceptsIsTaken() {
    DataflowGraph g = chain();
    PlanningContext ctx = PlanningContext.of(Budget.of(110 * MIB), TensorPolicy.builtin(g));
    MemoryPlan twoAhead = swapping(g, ctx, 1, 2, 0);
    MemoryPlan slow = swapping(g, ctx, 1, 1, 0);
    MemoryPlan fast = swapping(g, ctx, 2, 2, 1);
    assertThat(AllocatorCheck.needBytes(twoAhead.applyTo(g), 200 * MIB, false))
        .isEqualTo(128 * MIB);
    assertThat(AllocatorCheck.needBytes(slow.applyTo(g), 200 * MIB, false)).isEqualTo(96 * MIB);
    assertThat(AllocatorCheck.needBytes(fast.applyTo(g), 200 * MIB, false)).isEqualTo(96 * MIB);
    assertThat(fast.estimate().stepMsAfter()).isLessThan(slow.estimate().stepMsAfter());
    List<Double> ratios = new ArrayList<>();
    List<Double> alternativeRatios = new ArrayList<>();
    AllocatorCheck.Outcome o = AllocatorCheck.check(g, g, ctx, twoAhead, c -> {
      ratios.add(c.budget().memRatio());
      return twoAhead;
    }, false, StepOrder.levelled(), List.of(c -> {
      alternativeRatios.add(c.budget().memRatio());
      return slow;
    }, c -> {
      throw new PlanningException("no plan for this budget", 200 * MIB);
    }, c -> {
      alternativeRatios.add(c.budget().memRatio());
      return fast;
    }));
    assertThat(ratios).hasSize(AllocatorCheck.TRIES - 1);
    // each alternative once, at the budget's own ratio
    assertThat(alternativeRatios).containsExactly(0.8, 0.8);
    assertThat(o.asGiven()).isFalse();
    assertThat(o.plan()).isSameAs(fast);
    // the planner's own plan is kept where the replay accepts it: no alternative is asked
    PlanningContext roomy = PlanningContext.of(Budget.of(160 * MIB), TensorPolicy.builtin(g));
    assertThat(AllocatorCheck.check(g, g, roomy, twoAhead, c -> twoAhead, false,
        StepOrder.levelled(), List.of(c -> {
          throw new AssertionError("an alternative planned at " + c.budget());
        })).plan()).isSameAs(twoAhead);
  }

  /**
   * An alternative whose first plan the replay rejects plans once more, aimed below by the
   * overshoot, and no more ({@link AllocatorCheck#ALTERNATIVE_TRIES}): at 110 MiB its plan at the
   * budget's ratio needs 128 MiB, its plan at the lower ratio 96, which is accepted.
   */
  @Test
  void anAlternativeWhoseFirstPlanIsRejectedPlansOnceMoreBelow() {
    DataflowGraph g = chain();
    PlanningContext ctx = PlanningContext.of(Budget.of(110 * MIB), TensorPolicy.builtin(g));
    MemoryPlan twoAhead = swapping(g, ctx, 1, 2, 0);
    MemoryPlan oneAhead = swapping(g, ctx, 1, 1, 0);
    List<Double> ratios = new ArrayList<>();
    AllocatorCheck.Outcome o = AllocatorCheck.check(g, g, ctx, twoAhead, c -> twoAhead, false,
        StepOrder.levelled(), List.of(c -> {
          ratios.add(c.budget().memRatio());
          return c.budget().memRatio() < 0.8 ? oneAhead : twoAhead;
        }));
    assertThat(AllocatorCheck.ALTERNATIVE_TRIES).isEqualTo(2);
    assertThat(ratios).hasSize(2);
    assertThat(ratios.get(1)).isLessThan(ratios.get(0));
    assertThat(o.plan()).isSameAs(oneAhead);
    // where the re-plan is rejected too, the alternative plans no third time
    List<Double> more = new ArrayList<>();
    AllocatorCheck.check(g, g, ctx, twoAhead, c -> twoAhead, false, StepOrder.levelled(),
        List.of(c -> {
          more.add(c.budget().memRatio());
          return twoAhead;
        }));
    assertThat(more).hasSize(AllocatorCheck.ALTERNATIVE_TRIES);
  }

  /**
   * Where no plan at all is accepted, the closest of the planner's and the alternatives' plans
   * is kept: at 90 MiB neither the planner's plan (128 MiB) nor the alternative's (96 MiB) leaves
   * the headroom, nor does the graph as given fit (144 MiB); the alternative's is kept, naming
   * its 96 MiB.
   */
  @Test
  void whereNoPlanIsAcceptedTheClosestOfAllPlansIsKept() {
    DataflowGraph g = chain();
    PlanningContext ctx = PlanningContext.of(Budget.of(90 * MIB), TensorPolicy.builtin(g));
    MemoryPlan twoAhead = swapping(g, ctx, 1, 2, 0);
    MemoryPlan oneAhead = swapping(g, ctx, 1, 1, 0);
    AllocatorCheck.Outcome o = AllocatorCheck.check(g, g, ctx, twoAhead, c -> twoAhead, false,
        StepOrder.levelled(), List.of(c -> oneAhead));
    assertThat(o.asGiven()).isFalse();
    assertThat(o.plan()).isSameAs(oneAhead);
    assertThat(o.needBytes()).isEqualTo(96 * MIB);
  }

  private static int[] levelled(DataflowGraph g) {
    return Levels.of(g).schedule();
  }
}
