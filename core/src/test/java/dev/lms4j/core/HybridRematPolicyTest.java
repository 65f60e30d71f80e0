package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.plan.HybridPlanner;
import dev.lms4j.core.plan.PlanSimulator;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.Rematerializer;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TensorPolicy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The hybrid planner and rematerialization read what they may do from the tensor policy. */
class HybridRematPolicyTest {
  private static final long MB = 1 << 20;

  /**
   * {@code SyntheticGraphs.trainingChain(20, 1 MiB, 64 KiB)} with its first ten activations
   * under {@code enc/} and the other ten under {@code dec/}: forward ReLUs, backward ReluGrad
   * ({@code gradients/g<i>}) and weight-gradient MatMul ({@code gradients/dw<i>}) both read the
   * previous activation. Without LMS the peak is ~23.3 MiB (all activations alive when the
   * backward pass starts).
   *
   * @param earlyReaders when set, each activation {@code i} also feeds a 4-byte {@code Mean}
   *                     {@code m<i>}, and a backward {@code Cast} {@code gradients/early<i>}
   *                     reads activation {@code i} and {@code m<i+2>}: it runs during the
   *                     forward pass, two layers after activation {@code i}, long before the
   *                     ReluGrad and MatMul that read the activation
   */
  static DataflowGraph scopedChain(boolean earlyReaders) {
    int layers = 20;
    DataflowGraphBuilder b = DataflowGraph.builder();
    Tensor act = new Tensor("float32", new long[] {MB / 64, 16}, MB, false);
    Tensor w = Tensor.persistent(64 * 1024);
    b.op("x", "Placeholder", OpCategory.FORWARD, List.of(), act);
    List<String> f = new ArrayList<>();
    f.add("x");
    for (int i = 1; i <= layers; i++) {
      String name = (i <= layers / 2 ? "enc/f" : "dec/f") + i;
      b.op("w" + i, "VariableV2", OpCategory.FORWARD, List.of(), w);
      b.op(name, "Relu", OpCategory.FORWARD, List.of(f.get(i - 1), "w" + i), act);
      f.add(name);
      if (earlyReaders) {
        b.op("m" + i, "Mean", OpCategory.FORWARD, List.of(name), Tensor.ofBytes(4));
        if (i >= 3) {
          b.op("gradients/early" + (i - 2), "Cast", OpCategory.BACKWARD,
              List.of(f.get(i - 2), "m" + i), Tensor.ofBytes(4));
        }
      }
    }
    b.op("loss", "Mean", OpCategory.FORWARD, List.of(f.get(layers)), Tensor.ofBytes(4));
    String grad = "gradients/g" + (layers + 1);
    b.op(grad, "Fill", OpCategory.BACKWARD, List.of("loss"), act);
    for (int i = layers; i >= 1; i--) {
      b.op("gradients/g" + i, "ReluGrad", OpCategory.BACKWARD, List.of(grad, f.get(i - 1),
          "w" + i), act);
      b.op("gradients/dw" + i, "MatMul", OpCategory.BACKWARD, List.of(grad, f.get(i - 1)),
          new Tensor("float32", new long[] {1024, 16}, 64 * 1024, false));
      b.op("train/apply" + i, "ApplyGradientDescent", OpCategory.OPTIMIZER,
          List.of("w" + i, "gradients/dw" + i), w);
      grad = "gradients/g" + i;
    }
    return b.build();
  }

  private static TensorPolicy policy(DataflowGraph g, SwapParams p) {
    return TensorPolicy.of(g, TensorPolicy.Spec.from(p));
  }

  /** Peak with both plans, through the independent fast simulator. */
  private static long checkedPeak(DataflowGraph g, HybridPlanner.Result r) {
    return new PlanSimulator(RecomputeApplier.apply(g, r.recompute())).peak(r.swaps());
  }

  private static List<String> swappedProducers(HybridPlanner.Result r) {
    return r.swaps().swapOuts().stream().map(SwapPlan.SwapOut::producer).toList();
  }

  /** Types of the ops that read a swap-in, looked up in the graph with the recompute plan. */
  private static List<String> swapInReaderTypes(DataflowGraph g, HybridPlanner.Result r) {
    DataflowGraph rg = RecomputeApplier.apply(g, r.recompute());
    List<String> types = new ArrayList<>();
    for (SwapPlan.SwapOut o : r.swaps().swapOuts()) {
      for (SwapPlan.SwapIn in : o.swapIns()) {
        in.consumers().forEach(c -> types.add(rg.opOrThrow(c).type()));
      }
    }
    return types;
  }

  /**
   * Budget 20 MiB at ratio 0.8: 16 MiB for a 23.3 MiB peak, so about 7.3 MiB must go; the
   * nine {@code dec/} activations the backward pass reads (dec/f11..dec/f19; f20 feeds only the
   * loss) hold 9 MiB, so the plan can fit without touching {@code enc/}. With {@code enc/}
   * excluded from swapping, no swap-out reads an {@code enc/} op, swapping alone or mixed with
   * recomputation, and the independent simulator confirms the plan fits.
   */
  @Test
  void anExcludedOutputScopeIsNeverSwapped() {
    DataflowGraph g = scopedChain(false);
    long budget = 20 * MB;
    long available = (long) (budget * 0.8);
    HybridPlanner.Result unfiltered = HybridPlanner.plan(g, HybridPlanner.Options.of(budget)
        .swapOnly());
    // without the filter the swap-only plan takes enc/ activations too: the filter has work
    assertThat(swappedProducers(unfiltered)).anyMatch(p -> p.startsWith("enc/"));

    TensorPolicy p = policy(g, SwapParams.defaults().toBuilder()
        .exclOutputByScopes(Set.of("enc/")).build());
    for (HybridPlanner.Options o : List.of(HybridPlanner.Options.of(budget).withPolicy(p),
        HybridPlanner.Options.of(budget).swapOnly().withPolicy(p))) {
      HybridPlanner.Result r = HybridPlanner.plan(g, o);
      assertThat(swappedProducers(r)).noneMatch(n -> n.startsWith("enc/"));
      assertThat(r.predictedPeak()).isLessThanOrEqualTo(available);
      assertThat(checkedPeak(g, r)).isEqualTo(r.predictedPeak());
    }
    HybridPlanner.Result swapOnly = HybridPlanner.plan(g, HybridPlanner.Options.of(budget)
        .swapOnly().withPolicy(p));
    assertThat(swappedProducers(swapOnly)).isNotEmpty().allMatch(n -> n.startsWith("dec/"));
  }

  /**
   * With the early backward readers ({@code Cast}) excluded from reading swap-ins, each
   * activation stays resident until its Cast has run (two layers later) and is
   * then swapped for the ReluGrad and MatMul that read it late: no swap-in is read by a Cast,
   * every swapped tensor has a Cast reader (the filter had work), and the plan fits at a 20 MiB
   * budget (16 MiB at ratio 0.8, peak ~23.3 MiB without LMS), as the independent simulator
   * confirms.
   */
  @Test
  void anExcludedInputTypeNeverReadsASwapIn() {
    DataflowGraph g = scopedChain(true);
    long budget = 20 * MB;
    long available = (long) (budget * 0.8);
    TensorPolicy p = policy(g, SwapParams.defaults().toBuilder()
        .exclInputByTypes(Set.of("Cast")).build());
    for (HybridPlanner.Options o : List.of(HybridPlanner.Options.of(budget).withPolicy(p),
        HybridPlanner.Options.of(budget).swapOnly().withPolicy(p))) {
      HybridPlanner.Result r = HybridPlanner.plan(g, o);
      assertThat(swapInReaderTypes(g, r)).doesNotContain("Cast");
      assertThat(r.predictedPeak()).isLessThanOrEqualTo(available);
      assertThat(checkedPeak(g, r)).isEqualTo(r.predictedPeak());
    }
    HybridPlanner.Result swapOnly = HybridPlanner.plan(g, HybridPlanner.Options.of(budget)
        .swapOnly().withPolicy(p));
    assertThat(swapOnly.swaps().swapOuts()).isNotEmpty();
    for (SwapPlan.SwapOut o : swapOnly.swaps().swapOuts()) {
      TensorId t = new TensorId(g.opOrThrow(o.producer()).id(), o.output());
      assertThat(Arrays.stream(g.consumers(t)).mapToObj(c -> g.op(c).type()))
          .contains("Cast", "ReluGrad");
    }
  }

  /**
   * In the plain chain each activation's MatMul reader runs next to its ReluGrad reader: without
   * a filter the swap-ins feed both; with MatMul excluded a swap would free nothing (the
   * original lives until the MatMul), so the plan at 20 MiB recomputes instead, and still no
   * MatMul reads a swap-in.
   */
  @Test
  void anExcludedInputTypeNextToTheOtherReaderMakesSwappingUseless() {
    DataflowGraph g = scopedChain(false);
    long budget = 20 * MB;
    HybridPlanner.Result unfiltered = HybridPlanner.plan(g, HybridPlanner.Options.of(budget)
        .swapOnly());
    assertThat(swapInReaderTypes(g, unfiltered)).contains("MatMul");
    TensorPolicy p = policy(g, SwapParams.defaults().toBuilder()
        .exclInputByTypes(Set.of("MatMul")).build());
    HybridPlanner.Result r = HybridPlanner.plan(g, HybridPlanner.Options.of(budget)
        .withPolicy(p));
    assertThat(swapInReaderTypes(g, r)).doesNotContain("MatMul");
    assertThat(r.recompute().clonedOps()).isPositive();
    assertThat(r.predictedPeak()).isLessThanOrEqualTo((long) (budget * 0.8));
    assertThat(checkedPeak(g, r)).isEqualTo(r.predictedPeak());
  }

  /** No policy means the built-in one: passing it explicitly gives the same plans. */
  @Test
  void theBuiltinPolicyIsTheDefault() {
    DataflowGraph g = scopedChain(false);
    TensorPolicy builtin = TensorPolicy.builtin(g);
    HybridPlanner.Options o = HybridPlanner.Options.of(20 * MB);
    assertThat(o.policy()).isNull();
    assertThat(HybridPlanner.plan(g, o.withPolicy(builtin))).isEqualTo(HybridPlanner.plan(g, o));
    for (Rematerializer.Mode m : Rematerializer.Mode.values()) {
      Rematerializer.Options ro = Rematerializer.Options.defaults().withMode(m);
      Rematerializer.Result a = Rematerializer.bestEffort(g, 16 * MB, ro);
      Rematerializer.Result b = Rematerializer.bestEffort(g, 16 * MB, ro.withPolicy(builtin));
      assertThat(b.plan()).isEqualTo(a.plan());
      assertThat(b.plan().groups()).isNotEmpty();
      assertThat(b.peakAfter()).isEqualTo(a.peakAfter());
      assertThat(b.decisions()).isEqualTo(a.decisions());
    }
  }
}
