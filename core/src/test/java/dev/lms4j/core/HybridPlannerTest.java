package dev.lms4j.core;

import dev.lms4j.core.plan.PlanCosts;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.plan.HybridPlanner;
import dev.lms4j.core.plan.PlanSimulator;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapPlan;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

class HybridPlannerTest {
  private static final Logger LOG = LoggerFactory.getLogger(HybridPlannerTest.class);
  private static final long MB = 1 << 20;

  /** Simulated peak of g with both plans, through the fast simulator (an independent path). */
  private static long checkedPeak(DataflowGraph g, HybridPlanner.Result r) {
    DataflowGraph rg = RecomputeApplier.apply(g, r.recompute());
    return new PlanSimulator(rg).peak(r.swaps());
  }

  @Test
  void aGenerousBudgetChangesNothing() {
    DataflowGraph g = SyntheticGraphs.trainingChain(8, MB, 64 * 1024);
    HybridPlanner.Result r = HybridPlanner.plan(g, HybridPlanner.Options.of(1L << 30));
    assertThat(r.needed()).isFalse();
    assertThat(r.swaps().isEmpty()).isTrue();
    assertThat(r.recompute().isEmpty()).isTrue();
  }

  /**
   * 20 layers of 1 MiB activations, 20 x 64 KiB weights: without LMS all 20 activations are alive
   * when the backward pass starts (peak ~23.3 MiB). At a 16 MiB budget (12.8 MiB at ratio 0.8)
   * about half of them must go, and the simulator must confirm the predicted peak.
   */
  @Test
  void fitsTheBudgetAndTheSimulatorAgrees() {
    DataflowGraph g = SyntheticGraphs.trainingChain(20, MB, 64 * 1024);
    long budget = 16 * MB;
    HybridPlanner.Result r = HybridPlanner.plan(g, HybridPlanner.Options.of(budget));
    assertThat(r.needed()).isTrue();
    assertThat(r.peakBefore()).isGreaterThan((long) (budget * 0.8));
    assertThat(r.predictedPeak()).isLessThanOrEqualTo((long) (budget * 0.8));
    assertThat(checkedPeak(g, r)).isEqualTo(r.predictedPeak());
    assertThat(r.swaps().swapOuts().size() + r.recompute().clonedOps()).isGreaterThan(0);
    assertThat(r.predictedStepMs()).isGreaterThan(r.baseStepMs());
    assertThat(r.predictedStepMs()).isCloseTo(
        PlanCosts.stepMs(CostModel.defaults(), g, r.swaps(), r.recompute()), org.assertj.core.data.Offset.offset(1e-9));
  }

  /**
   * The chain's forward ops are ReLUs (cheap): recomputing one costs ~70 us at 30 GB/s, swapping
   * its 1 MiB out and back in ~800 us at 2.7 GB/s. The planner should prefer recomputation, and
   * with recomputation forbidden it swaps.
   */
  @Test
  void prefersTheCheaperOptionAndHonoursTheSwapOnlyVariant() {
    DataflowGraph g = SyntheticGraphs.trainingChain(20, MB, 64 * 1024);
    HybridPlanner.Result both = HybridPlanner.plan(g, HybridPlanner.Options.of(16 * MB));
    assertThat(both.recompute().clonedOps()).isGreaterThan(0);
    HybridPlanner.Result swap = HybridPlanner.plan(g, HybridPlanner.Options.of(16 * MB)
        .swapOnly());
    assertThat(swap.recompute().isEmpty()).isTrue();
    assertThat(swap.swaps().swapOuts()).isNotEmpty();
    assertThat(swap.predictedPeak()).isLessThanOrEqualTo((long) (16 * MB * 0.8));
    assertThat(both.predictedStepMs()).isLessThanOrEqualTo(swap.predictedStepMs());
  }

  /**
   * Dropout-like chain: mask_i = RandomUniform(f_(i-1)), f_i = f_(i-1) * mask_i, and the backward
   * pass reads only the masks. The masks are the only candidates: swapped, never recomputed.
   */
  @Test
  void neverRecomputesRandomOrStatefulOps() {
    DataflowGraphBuilder b = DataflowGraph.builder();
    b.op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(MB));
    String prev = "x";
    for (int i = 1; i <= 6; i++) {
      b.op("mask" + i, "RandomUniform", OpCategory.FORWARD, List.of(prev),
          new Tensor("float32", new long[] {MB / 4}, MB, false));
      b.op("f" + i, "Mul", OpCategory.FORWARD, List.of(prev, "mask" + i), Tensor.ofBytes(MB));
      prev = "f" + i;
    }
    b.op("loss", "Mean", OpCategory.FORWARD, List.of(prev), Tensor.ofBytes(4));
    b.op("gradients/g7", "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes(MB));
    String grad = "gradients/g7";
    for (int i = 6; i >= 1; i--) {
      b.op("gradients/g" + i, "Mul", OpCategory.BACKWARD, List.of(grad, "mask" + i),
          Tensor.ofBytes(MB));
      grad = "gradients/g" + i;
    }
    DataflowGraph g = b.build();
    long before = SwapAutoTuner.simulatePeak(g, SwapPlan.empty(
        dev.lms4j.core.plan.SwapParams.defaults()));
    HybridPlanner.Result r = HybridPlanner.plan(g, HybridPlanner.Options.of(
        (long) (before * 0.7 / 0.8)));
    for (RecomputePlan.Group gr : r.recompute().groups()) {
      for (String op : gr.ops()) {
        assertThat(OpTypes.isRandomOrStateful(g.opOrThrow(op).type())).as(op).isFalse();
      }
    }
    assertThat(r.swaps().swapOuts()).extracting(SwapPlan.SwapOut::producer)
        .anyMatch(p -> p.startsWith("mask"));
    assertThat(checkedPeak(g, r)).isLessThanOrEqualTo((long) (before * 0.7));
  }

  /**
   * A U-Net's skip tensor: {@code skip} (4 MiB) is read by the first op of a chain and again by
   * the concat at its end, both in the forward pass, and the chain's widest op (6 MiB) sets the
   * peak while {@code skip} waits. No backward op reads it, so it is not a forward tensor the
   * backward pass reads; the planner swaps it across the chain (its longest unread stretch),
   * the concat reading the swap-in, and nothing else fits.
   */
  @Test
  void swapsATensorAcrossTheLongestStretchNothingReadsIt() {
    long kb = 1024;
    DataflowGraphBuilder b = DataflowGraph.builder();
    b.op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(64 * kb));
    b.op("skip", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(4 * MB));
    String prev = "skip";
    for (int i = 1; i <= 10; i++) {
      b.op("d" + i, "Relu", OpCategory.FORWARD, List.of(prev),
          Tensor.ofBytes(i == 5 ? 6 * MB : 256 * kb));
      prev = "d" + i;
    }
    b.op("concat", "ConcatV2", OpCategory.FORWARD, List.of(prev, "skip"),
        Tensor.ofBytes(4 * MB + 256 * kb));
    b.op("loss", "Mean", OpCategory.FORWARD, List.of("concat"), Tensor.ofBytes(4));
    b.op("gradients/g", "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes(4));
    DataflowGraph g = b.build();
    long before = SwapAutoTuner.simulatePeak(g, SwapPlan.empty(
        dev.lms4j.core.plan.SwapParams.defaults()));
    assertThat(before).isGreaterThan(10 * MB);
    long budget = (long) (9.2 * MB / 0.8);
    HybridPlanner.Result r = HybridPlanner.plan(g, HybridPlanner.Options.of(budget).swapOnly());
    assertThat(r.swaps().swapOuts()).extracting(SwapPlan.SwapOut::producer)
        .containsExactly("skip");
    SwapPlan.SwapOut out = r.swaps().swapOuts().get(0);
    assertThat(out.swapIns()).hasSize(1);
    assertThat(out.swapIns().get(0).consumers()).containsExactly("concat");
    assertThat(r.predictedPeak()).isLessThanOrEqualTo((long) (budget * 0.8));
    assertThat(checkedPeak(g, r)).isEqualTo(r.predictedPeak());
  }

  /**
   * Weights 20 x 64 KiB = 1.25 MiB are resident and the largest op (a ReluGrad: gradient,
   * activation in, gradient out = 3 MiB) must fit: a 2 MiB budget cannot work whatever is done.
   */
  @Test
  void anImpossibleBudgetNamesTheSmallestOne() {
    DataflowGraph g = SyntheticGraphs.trainingChain(20, MB, 64 * 1024);
    assertThatThrownBy(() -> HybridPlanner.plan(g, HybridPlanner.Options.of(2 * MB)))
        .isInstanceOf(PlanningException.class)
        .hasMessageContaining("smallest budget")
        .satisfies(e -> {
          long floor = ((PlanningException) e).smallestBudgetBytes();
          // the floor named for a budget far below it is a true lower bound: a byte less fails
          // the same way
          assertThatThrownBy(() -> HybridPlanner.plan(g, HybridPlanner.Options.of(floor - 1)))
              .isInstanceOfSatisfying(PlanningException.class,
                  below -> assertThat(below.smallestBudgetBytes()).isEqualTo(floor));
          // at the floor the search names the budget it really needs (80 KiB above the floor
          // on this chain: the floor check does not see everything the search does); planning
          // there succeeds and a byte less fails
          long[] named = {0};
          assertThatThrownBy(() -> HybridPlanner.plan(g, HybridPlanner.Options.of(floor)))
              .isInstanceOfSatisfying(PlanningException.class,
                  at -> named[0] = at.smallestBudgetBytes());
          assertThat(named[0]).isGreaterThan(floor);
          assertThat(HybridPlanner.plan(g, HybridPlanner.Options.of(named[0]))
              .predictedPeak()).isLessThanOrEqualTo((long) (named[0] * 0.8));
          assertThatThrownBy(() -> HybridPlanner.plan(g, HybridPlanner.Options.of(named[0] - 1)))
              .isInstanceOf(PlanningException.class);
        });
  }

  /**
   * With overlap and a slow link, swap-in triggers move earlier (further from the reader) so
   * the transfer hides; the predicted overhead is below the no-overlap one.
   */
  @Test
  void overlapHidesTransfersBehindCompute() {
    DataflowGraph g = SyntheticGraphs.trainingChain(20, MB, 64 * 1024);
    CostModel serial = CostModel.defaults();
    CostModel overlapped = serial.withOverlap(true);
    HybridPlanner.Options opts = HybridPlanner.Options.of(16 * MB).swapOnly();
    HybridPlanner.Result a = HybridPlanner.plan(g, opts.withCostModel(serial));
    HybridPlanner.Result b = HybridPlanner.plan(g, opts.withCostModel(overlapped));
    assertThat(b.overheadMs()).isLessThan(a.overheadMs());
    assertThat(checkedPeak(g, b)).isEqualTo(b.predictedPeak());
  }

  /** Planning time at 10k and 100k ops (logged; the brief asks <= 2 s at 10k). */
  @Test
  void plansTenThousandOps() {
    DataflowGraph g = SyntheticGraphs.trainingChain(2000, MB, 64 * 1024);
    long before = SwapAutoTuner.simulatePeak(g, SwapPlan.empty(
        dev.lms4j.core.plan.SwapParams.defaults()));
    HybridPlanner.plan(g, HybridPlanner.Options.of(before / 2)); // warm-up
    long t0 = System.nanoTime();
    HybridPlanner.Result r = HybridPlanner.plan(g, HybridPlanner.Options.of(before / 2));
    long ms = (System.nanoTime() - t0) / 1_000_000;
    LOG.info("hybrid planning of {} ops: {} ms, {} simulations", g.size(), ms, r.simulations());
    assertThat(r.predictedPeak()).isLessThanOrEqualTo((long) (before / 2 * 0.8));
  }
}
