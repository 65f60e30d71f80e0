package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.plan.HybridPlanner;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TflmsSwapPlanner;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Grappler sorts the inputs of an {@code AddN} by name, so a swap-in or a clone re-pointed into
 * an AddN of three or more inputs changes the order of the sum and its rounding (GPT-2's second
 * loss moved by one ulp). No planner re-points such a reader; a two-input sum is exactly
 * commutative and may be re-pointed, which this test also checks so that it can fail.
 *
 * <p>The graph: x (feed), w (variable), c1 = MatMul(x, w), r1 = Relu(c1) (16 KB, the big one),
 * c2 = MatMul(r1, w), r2 = Relu(c2), loss; backward g2 = Fill(loss), rg2 = ReluGrad(g2, c2),
 * z = Fill(loss) (4 bytes), s = AddN(rg2, r1[, z]), mg = MatMul(s, x), apply(w, mg). r1 is read by s only in the backward
 * pass, far from where it is made.
 */
class OrderSensitiveReadersTest {
  private static final long KB = 1024;

  static DataflowGraph graph(int sumInputs) {
    List<String> sum = new ArrayList<>(List.of("gradients/rg2", "r1"));
    if (sumInputs == 3) {
      sum.add("gradients/z");
    }
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("c1", "MatMul", OpCategory.FORWARD, List.of("x", "w"), Tensor.ofBytes(4 * KB))
        .op("r1", "Relu", OpCategory.FORWARD, List.of("c1"),
            new Tensor("float32", new long[] {64, 64}, 16 * KB, false))
        .op("c2", "MatMul", OpCategory.FORWARD, List.of("r1", "w"), Tensor.ofBytes(4 * KB))
        .op("r2", "Relu", OpCategory.FORWARD, List.of("c2"), Tensor.ofBytes(4 * KB))
        .op("loss", "Mean", OpCategory.FORWARD, List.of("r2"), Tensor.ofBytes(4))
        .op("gradients/g2", "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes(4 * KB))
        .op("gradients/z", "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes(4))
        .op("gradients/rg2", "ReluGrad", OpCategory.BACKWARD, List.of("gradients/g2", "c2"),
            Tensor.ofBytes(4 * KB))
        .op("gradients/s", "AddN", OpCategory.BACKWARD, sum, Tensor.ofBytes(4 * KB))
        .op("gradients/mg", "MatMul", OpCategory.BACKWARD, List.of("gradients/s", "x"),
            Tensor.ofBytes(KB))
        .op("train/apply", "ApplyGradientDescent", OpCategory.OPTIMIZER,
            List.of("w", "gradients/mg"), Tensor.persistent(KB))
        .build();
  }

  @ParameterizedTest(name = "AddN of {0} inputs")
  @ValueSource(ints = {2, 3})
  void nAryReadersAreNeverRepointed(int sumInputs) {
    DataflowGraph g = graph(sumInputs);
    boolean sensitive = sumInputs >= 3;
    assertThat(OpTypes.orderSensitive(g.opOrThrow("gradients/s"))).isEqualTo(sensitive);

    RecomputePlan heuristic = RecomputePlanner.heuristic(g);
    assertThat(readers(heuristic)).as("recompute groups' readers")
        .containsExactlyElementsOf(sensitive ? List.of() : List.of("gradients/s"));

    SwapPlan tflms = TflmsSwapPlanner.plan(g,
        SwapParams.defaults().toBuilder().swapoutThreshold(1).swapinAhead(1).swapinGroupby(0)
            .build());
    assertThat(readers(tflms)).as("TFLMS swap-ins' readers")
        .containsExactlyElementsOf(sensitive ? List.of() : List.of("gradients/s"));

    // peak 30 KB (x, w, and r1 alive from c1 to s with c2, g2, rg2), floor 26 KB (s's working
    // set: rg2 + r1 + its output, plus x and w); at floor + 1 KB only taking r1 away between c2
    // and s fits, and that re-points s
    long peak = RecomputePlanner.peak(g, RecomputePlan.empty());
    long floor = LowerBound.of(g);
    assertThat(peak).isEqualTo(30 * KB + (sensitive ? 4 : 0));
    assertThat(floor).isEqualTo(26 * KB + (sensitive ? 4 : 0));
    HybridPlanner.Options o = HybridPlanner.Options.of(floor + KB).withMemRatio(1.0);
    if (sensitive) {
      assertThatThrownBy(() -> HybridPlanner.plan(g, o)).isInstanceOf(PlanningException.class);
    } else {
      HybridPlanner.Result h = HybridPlanner.plan(g, o);
      assertThat(Stream.concat(readers(h.swaps()).stream(), readers(h.recompute()).stream()))
          .as("hybrid readers").contains("gradients/s");
    }
  }

  private static List<String> readers(RecomputePlan p) {
    return p.groups().stream().flatMap(gr -> gr.repoints().stream())
        .map(RecomputePlan.Repoint::consumer).distinct().toList();
  }

  private static List<String> readers(SwapPlan p) {
    return p.swapOuts().stream().flatMap(so -> so.swapIns().stream())
        .flatMap(si -> si.consumers().stream()).distinct().toList();
  }
}
