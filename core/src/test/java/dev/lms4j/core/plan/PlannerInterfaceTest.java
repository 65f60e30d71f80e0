package dev.lms4j.core.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

/**
 * Every mode behind one interface, with one plan value; the tensor policy's constraints hold in
 * every mode.
 *
 * <p>The graph: 20 layers of 1 MiB activations and 64 KiB weights. Without LMS every activation
 * is alive when the backward pass starts: about 23 MiB simulated. A 16 MiB budget (12.8 MiB
 * limit at ratio 0.8) needs about half of them gone.
 */
class PlannerInterfaceTest {
  private static final long MB = 1 << 20;
  private static final DataflowGraph G = SyntheticGraphs.trainingChain(20, MB, 64 * 1024);
  private static final Budget BUDGET = Budget.of(16 * MB);

  private static PlanningContext ctx(TensorPolicy.Spec spec) {
    return PlanningContext.of(BUDGET, TensorPolicy.of(G, spec));
  }

  @ParameterizedTest
  @EnumSource(value = LmsMode.class, names = {"TFLMS", "SWAP", "REMAT_XLA", "REMAT_PATH", "AUTO",
      "HYBRID", "BASELINE"})
  void everyModeFitsAndItsEstimateIsWhatTheSimulatorSees(LmsMode mode) {
    MemoryPlan p = mode.plan(G, ctx(TensorPolicy.Spec.builtin()));
    assertThat(p.needed()).isTrue();
    assertThat(p.estimate().peakBefore()).isGreaterThan(BUDGET.limit());
    assertThat(p.estimate().peakAfter()).isLessThanOrEqualTo(BUDGET.limit());
    // the estimate is checked by applying the plan to the model and simulating it again
    assertThat(p.simulatePeak(G)).isEqualTo(p.estimate().peakAfter());
    assertThat(p.estimate().stepMsAfter()).isGreaterThanOrEqualTo(p.estimate().stepMsBefore());
  }

  @Test
  void aGenerousBudgetChangesNothingAndOffNeverPlans() {
    PlanningContext big = PlanningContext.of(Budget.of(1L << 30), TensorPolicy.builtin(G));
    for (LmsMode m : LmsMode.values()) {
      if (m == LmsMode.SQRT || m == LmsMode.OPTIMAL) {
        continue; // sqrt ignores the budget by design; optimal lives in lms4j-optimal
      }
      assertThat(m.plan(G, big).needed()).as(m.cliName()).isFalse();
    }
    assertThat(LmsMode.OFF.plan(G, ctx(TensorPolicy.Spec.builtin().withRecompute(Set.of("f3"))))
        .needed()).isFalse();
  }

  @Test
  void modesNeedingABudgetSaySo() {
    PlanningContext none = PlanningContext.of(Budget.none(), TensorPolicy.builtin(G));
    for (LmsMode m : List.of(LmsMode.SWAP, LmsMode.AUTO, LmsMode.REMAT_XLA)) {
      assertThatThrownBy(() -> m.plan(G, none)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("needs a budget");
    }
    // grappler-style groups without a budget: every cheap group (the 20 ReLUs; each group
    // keeps its input alive, so on this chain they cannot meet a budget: see below)
    assertThat(LmsMode.REMAT.plan(G, none).recompute().clonedOps()).isEqualTo(20);
    assertThatThrownBy(() -> LmsMode.REMAT.plan(G, ctx(TensorPolicy.Spec.builtin())))
        .isInstanceOf(PlanningException.class);
  }

  @Test
  void namesParseAndStayInOnePlace() {
    for (LmsMode m : LmsMode.values()) {
      if (m.userFacing()) {
        assertThat(LmsMode.parse(m.cliName().toUpperCase())).isEqualTo(m);
      } else {
        assertThatThrownBy(() -> LmsMode.parse(m.cliName())).hasMessageContaining("expected");
      }
    }
    assertThat(LmsMode.parse(" None ")).isEqualTo(LmsMode.OFF);
    assertThatThrownBy(() -> LmsMode.parse("nonee")).hasMessageContaining("expected off,");
    assertThat(LmsMode.cliNames()).isEqualTo(
        "off, tflms, swap, remat, remat-xla, remat-path, auto, sqrt");
    SwapParams manual = SwapParams.builder().swapoutThreshold(3).swapinAhead(1).swapinGroupby(0)
        .build();
    assertThat(LmsMode.AUTO.with(manual)).isEqualTo(LmsMode.TFLMS);
    assertThat(LmsMode.AUTO.with(SwapParams.defaults())).isEqualTo(LmsMode.AUTO);
  }

  @ParameterizedTest
  @EnumSource(value = LmsMode.class, names = {"TFLMS", "SWAP", "REMAT", "REMAT_XLA", "AUTO"})
  void namedOpsAreRecomputedInEveryMode(LmsMode mode) {
    MemoryPlan p = mode.plan(G, ctx(TensorPolicy.Spec.builtin().withRecompute(Set.of("f5"))));
    RecomputePlan first = p.recomputeStages().get(0);
    assertThat(first.groups()).singleElement()
        .satisfies(gr -> assertThat(gr.ops()).containsExactly("f5"));
    assertThat(p.planner()).startsWith(ForcedDecisions.MANUAL);
    assertThat(p.simulatePeak(G)).isEqualTo(p.estimate().peakAfter());
    if (mode == LmsMode.REMAT) {
      // a manual choice is all remat does
      assertThat(p.recomputeStages()).hasSize(1);
      assertThat(p.swaps().isEmpty()).isTrue();
    } else {
      assertThat(p.estimate().peakAfter()).isLessThanOrEqualTo(BUDGET.limit());
    }
  }

  @ParameterizedTest
  @EnumSource(value = LmsMode.class, names = {"TFLMS", "SWAP", "REMAT", "REMAT_XLA", "AUTO"})
  void markedInputsAreSwappedInEveryMode(LmsMode mode) {
    // gradients/g3 reads f2 as its input 1 (remat's groups cannot meet the budget on this
    // chain, so it plans without one)
    PlanningContext c = ctx(TensorPolicy.Spec.builtin()
        .withSwapToHost(Map.of("gradients/g3", Set.of(1))));
    MemoryPlan p = mode.plan(G, mode == LmsMode.REMAT ? c.withBudget(Budget.none()) : c);
    assertThat(p.swaps().swapOuts()).filteredOn(so -> so.producer().equals("f2"))
        .singleElement().satisfies(so -> assertThat(so.swapIns())
            .anySatisfy(si -> assertThat(si.consumers()).contains("gradients/g3")));
    assertThat(p.simulatePeak(G)).isEqualTo(p.estimate().peakAfter());
  }

  @ParameterizedTest
  @EnumSource(value = LmsMode.class, names = {"TFLMS", "SWAP", "AUTO", "HYBRID", "BASELINE"})
  void outputAndInputFiltersHoldInEverySwappingMode(LmsMode mode) {
    // no tensor of f2 or f20 swaps; the weight gradients dw1, dw10..dw19 read no swap-in (so
    // the activations they read stay alive: excluding every MatMul would leave nothing to win)
    TensorPolicy.Spec spec = new TensorPolicy.Spec(Set.of("f2"), Set.of(), Set.of(), Set.of(),
        Set.of("gradients/dw1"), Set.of(), Set.of(), Set.of(), Set.of(), Map.of(), 0);
    MemoryPlan p = mode.plan(G, ctx(spec).withBudget(Budget.of(24 * MB)));
    assertThat(p.estimate().peakAfter()).isLessThanOrEqualTo(Budget.of(24 * MB).limit());
    if (mode == LmsMode.TFLMS || mode == LmsMode.SWAP) {
      assertThat(p.swaps().swapOuts()).isNotEmpty();
    }
    assertThat(p.swaps().swapOuts()).noneMatch(so -> so.producer().startsWith("f2"));
    assertThat(p.swaps().swapOuts()).flatMap(SwapPlan.SwapOut::swapIns)
        .flatMap(SwapPlan.SwapIn::consumers).noneMatch(c -> c.startsWith("gradients/dw1"));
  }

  @Test
  void aNewPlannerIsOneClass() {
    // the worked example of docs/planner.md, planned with the forced decisions around it
    PlanningContext c = ctx(TensorPolicy.Spec.builtin().withRecompute(Set.of("f7")));
    MemoryPlan p = ForcedDecisions.plan(new LargestActivationsPlanner(6), G, c);
    assertThat(p.planner()).isEqualTo("manual-recompute+largest-6");
    assertThat(p.swaps().swapOuts()).hasSize(6);
    assertThat(p.recomputeStages().get(0).groups().get(0).ops()).containsExactly("f7");
    assertThat(p.estimate().peakAfter()).isLessThan(p.estimate().peakBefore());
    assertThat(p.simulatePeak(G)).isEqualTo(p.estimate().peakAfter());
  }
}
