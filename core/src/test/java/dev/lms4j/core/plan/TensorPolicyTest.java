package dev.lms4j.core.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class TensorPolicyTest {
  private static final long MB = 1 << 20;
  private static final DataflowGraph CHAIN = SyntheticGraphs.trainingChain(6, MB, 64 * 1024);

  private static TensorId out(DataflowGraph g, String op) {
    return new TensorId(g.opOrThrow(op).id(), 0);
  }

  @Test
  void builtInRulesKeepParametersFeedsAndBackwardOps() {
    TensorPolicy p = TensorPolicy.builtin(CHAIN);
    // a forward activation: both
    assertThat(p.kinds(CHAIN, out(CHAIN, "f3")))
        .containsExactlyInAnyOrder(TensorPolicy.Kind.MAY_SWAP, TensorPolicy.Kind.MAY_RECOMPUTE);
    // a weight (persistent), the fed placeholder (excluded type), a gradient (not forward, but
    // swappable)
    assertThat(p.kinds(CHAIN, out(CHAIN, "w3"))).containsExactly(TensorPolicy.Kind.MUST_KEEP);
    assertThat(p.kinds(CHAIN, out(CHAIN, "x"))).containsExactly(TensorPolicy.Kind.MUST_KEEP);
    assertThat(p.kinds(CHAIN, out(CHAIN, "gradients/g3")))
        .containsExactly(TensorPolicy.Kind.MAY_SWAP);
    assertThat(p.forcesDecisions()).isFalse();
    assertThat(p.filtersSwaps()).isFalse();
  }

  @Test
  void filtersDecideWhatSwapsAndWhoReadsASwapIn() {
    TensorPolicy.Spec spec = new TensorPolicy.Spec(Set.of("f2"), Set.of(), Set.of(), Set.of(),
        Set.of(), Set.of("MatMul"), Set.of(), Set.of(), Set.of(), Map.of(), 0);
    TensorPolicy p = TensorPolicy.of(CHAIN, spec);
    assertThat(p.maySwap(CHAIN, out(CHAIN, "f2"))).isFalse();
    assertThat(p.maySwap(CHAIN, out(CHAIN, "f3"))).isTrue();
    assertThat(p.maySwapInto(CHAIN.opOrThrow("gradients/dw3"))).isFalse();
    assertThat(p.maySwapInto(CHAIN.opOrThrow("gradients/g3"))).isTrue();
    // an include list admits only what it names
    TensorPolicy incl = TensorPolicy.of(CHAIN, new TensorPolicy.Spec(Set.of(), Set.of(),
        Set.of("f4"), Set.of(), Set.of(), Set.of(), Set.of(), Set.of(), Set.of(), Map.of(), 0));
    assertThat(incl.maySwap(CHAIN, out(CHAIN, "f4"))).isTrue();
    assertThat(incl.maySwap(CHAIN, out(CHAIN, "f3"))).isFalse();
    assertThat(incl.filtersSwaps()).isTrue();
    // the census: f1..f6 and the loss (a Mean) may be recomputed, whatever the swap filters
    assertThat(p.census(CHAIN).get(TensorPolicy.Kind.MAY_RECOMPUTE)).isEqualTo(7);
  }

  @Test
  void namedOpsAreForcedAndCheckedOnce() {
    TensorPolicy p = TensorPolicy.of(CHAIN, TensorPolicy.Spec.builtin()
        .withRecompute(Set.of("f2", "not_in_this_step")));
    assertThat(p.mustRecompute()).containsExactly("f2");
    assertThat(p.kinds(CHAIN, out(CHAIN, "f2"))).contains(TensorPolicy.Kind.MUST_RECOMPUTE);
    assertThatThrownBy(() -> TensorPolicy.of(CHAIN, TensorPolicy.Spec.builtin()
        .withRecompute(Set.of("w2")))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("w2 (VariableV2) cannot be recomputed");
    assertThatThrownBy(() -> TensorPolicy.of(CHAIN, TensorPolicy.Spec.builtin()
        .withRecompute(Set.of("gradients/g2")))).hasMessageContaining("cannot be recomputed");
  }

  @Test
  void randomOpsAreNeverRecomputable() {
    DataflowGraphBuilder b = DataflowGraph.builder();
    Tensor t = new Tensor("float32", new long[] {1024, 256}, MB, false);
    b.op("noise", "RandomUniform", OpCategory.FORWARD, List.of(), t);
    b.op("y", "Relu", OpCategory.FORWARD, List.of("noise"), t);
    DataflowGraph g = b.build();
    TensorPolicy p = TensorPolicy.builtin(g);
    assertThat(p.mayRecompute(g.opOrThrow("noise"))).isFalse();
    assertThat(p.mayRecompute(g.opOrThrow("y"))).isTrue();
    assertThatThrownBy(() -> TensorPolicy.of(g, TensorPolicy.Spec.builtin()
        .withRecompute(Set.of("noise")))).hasMessageContaining("random, stateful");
  }

  @Test
  void swapToHostNamesConsumerInputs() {
    TensorPolicy p = TensorPolicy.of(CHAIN, TensorPolicy.Spec.builtin()
        .withSwapToHost(Map.of("gradients/g3", Set.of(1))));
    // input 1 of gradients/g3 is f2
    assertThat(p.mustSwap()).containsExactly(new TensorPolicy.ForcedSwap(out(CHAIN, "f2"),
        List.of(CHAIN.opOrThrow("gradients/g3").id())));
    assertThat(p.kinds(CHAIN, out(CHAIN, "f2"))).contains(TensorPolicy.Kind.MUST_SWAP);
    // input 2 is the weight w3: a parameter cannot be swapped
    assertThatThrownBy(() -> TensorPolicy.of(CHAIN, TensorPolicy.Spec.builtin()
        .withSwapToHost(Map.of("gradients/g3", Set.of(2))))).hasMessageContaining("w3")
        .hasMessageContaining("cannot be swapped");
    assertThatThrownBy(() -> TensorPolicy.of(CHAIN, TensorPolicy.Spec.builtin()
        .withSwapToHost(Map.of("gradients/g3", Set.of(7))))).hasMessageContaining("no input 7");
  }

  @Test
  void budgetLimitIsTheOnePlaceTheRatioApplies() {
    Budget b = new Budget(100 * MB, 0.8);
    assertThat(b.limit()).isEqualTo(80 * MB);
    assertThat(b.fits(80 * MB)).isTrue();
    assertThat(b.fits(80 * MB + 1)).isFalse();
    // the inverse: the smallest budget whose limit holds a peak
    assertThat(b.smallestBudgetFor(80 * MB)).isEqualTo(100 * MB);
    assertThat(new Budget(b.smallestBudgetFor(80 * MB + 1), 0.8).fits(80 * MB + 1)).isTrue();
    assertThat(Budget.none().isSet()).isFalse();
    assertThat(Budget.none().fits(Long.MAX_VALUE)).isTrue();
    assertThatThrownBy(() -> new Budget(MB, 1.5)).isInstanceOf(IllegalArgumentException.class);
  }
}
