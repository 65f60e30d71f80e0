package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.graph.Levels;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RecomputePlannerTest {
  private static final long KB = 1024;

  /**
   * x (feed, 1 KB), w (variable, 1 KB); c1 = MatMul(x, w), r1 = act(c1), c2 = MatMul(r1, w),
   * r2 = Relu(c2), loss; backward: g2 = Fill(loss), rg2 = ReluGrad(g2, c2), mg2 = MatMul(rg2, r1),
   * rg1 = ReluGrad(mg2, c1), mg1 = MatMul(rg1, x), apply. Activations and gradients are 4 KB.
   * Shared with {@link RematerializerTest}.
   */
  /**
   * {@code n} layers as {@link #twoLayers} builds two (MatMul, then Relu, whose output the next
   * layer's weight gradient reads), layer i's activations (i + 2) KB.
   */
  static DataflowGraph layers(int n) {
    var b = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB));
    String in = "x";
    for (int i = 1; i <= n; i++) {
      b.op("c" + i, "MatMul", OpCategory.FORWARD, List.of(in, "w"), Tensor.ofBytes((i + 2) * KB));
      b.op("r" + i, "Relu", OpCategory.FORWARD, List.of("c" + i), Tensor.ofBytes((i + 2) * KB));
      in = "r" + i;
    }
    b.op("loss", "Mean", OpCategory.FORWARD, List.of(in), Tensor.ofBytes(4));
    String g = "gradients/g";
    b.op(g, "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes((n + 2) * KB));
    for (int i = n; i >= 1; i--) {
      b.op("gradients/rg" + i, "ReluGrad", OpCategory.BACKWARD, List.of(g, "c" + i),
          Tensor.ofBytes((i + 2) * KB));
      String prev = i == 1 ? "x" : "r" + (i - 1);
      b.op("gradients/mg" + i, "MatMul", OpCategory.BACKWARD,
          List.of("gradients/rg" + i, prev), Tensor.ofBytes((i + 1) * KB));
      g = "gradients/mg" + i;
    }
    return b.op("train/apply", "ApplyGradientDescent", OpCategory.OPTIMIZER, List.of("w", g),
        Tensor.persistent(KB)).build();
  }

  static DataflowGraph twoLayers(String firstActivationType) {
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("c1", "MatMul", OpCategory.FORWARD, List.of("x", "w"), Tensor.ofBytes(4 * KB))
        .op("r1", firstActivationType, OpCategory.FORWARD, List.of("c1"), Tensor.ofBytes(4 * KB))
        .op("c2", "MatMul", OpCategory.FORWARD, List.of("r1", "w"), Tensor.ofBytes(4 * KB))
        .op("r2", "Relu", OpCategory.FORWARD, List.of("c2"), Tensor.ofBytes(4 * KB))
        .op("loss", "Mean", OpCategory.FORWARD, List.of("r2"), Tensor.ofBytes(4))
        .op("gradients/g2", "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes(4 * KB))
        .op("gradients/rg2", "ReluGrad", OpCategory.BACKWARD, List.of("gradients/g2", "c2"),
            Tensor.ofBytes(4 * KB))
        .op("gradients/mg2", "MatMul", OpCategory.BACKWARD, List.of("gradients/rg2", "r1"),
            Tensor.ofBytes(4 * KB))
        .op("gradients/rg1", "ReluGrad", OpCategory.BACKWARD, List.of("gradients/mg2", "c1"),
            Tensor.ofBytes(4 * KB))
        .op("gradients/mg1", "MatMul", OpCategory.BACKWARD, List.of("gradients/rg1", "x"),
            Tensor.ofBytes(KB))
        .op("train/apply", "ApplyGradientDescent", OpCategory.OPTIMIZER,
            List.of("w", "gradients/mg1"), Tensor.persistent(KB))
        .build();
  }

  /**
   * Without remat the peak is at rg2: pinned x + w (2 KB) + c1, r1, c2 (kept for the backward
   * pass) + g2 + rg2 = 2 + 5 x 4 = 22 KB. Recomputing r1 (Relu of c1, which stays alive for rg1
   * anyway) lets r1 die after c2: the peak drops to 18 KB (at rg2: 2 + c1 + c2 + g2 + rg2; then
   * at mg2: 2 + c1 + rg2 + r1' + mg2). A limit of 20 KB lies between.
   */
  @Test
  void recomputesTheReluUnderALimitBetweenThePeaks() {
    DataflowGraph g = twoLayers("Relu");
    assertThat(RecomputePlanner.peak(g, RecomputePlan.empty())).isEqualTo(22 * KB);
    RecomputePlanner.Result r = RecomputePlanner.underBudget(g, 20 * KB, 1.0);
    assertThat(r.needed()).isTrue();
    assertThat(r.predictedPeak()).isEqualTo(18 * KB);
    RecomputePlan.Group gr = r.plan().groups().get(0);
    assertThat(r.plan().groups()).hasSize(1);
    assertThat(gr.ops()).containsExactly("r1");
    assertThat(gr.repoints()).containsExactly(new RecomputePlan.Repoint("gradients/mg2", "r1", 0));
    assertThat(gr.triggers()).containsExactly("gradients/rg2");
    // the clone runs in the backward pass, right after its trigger and before mg2
    DataflowGraph rw = RecomputeApplier.apply(g, r.plan());
    int[] order = Levels.of(rw).schedule();
    List<String> names = Arrays.stream(order).mapToObj(i -> rw.op(i).name()).toList();
    String clone = RecomputePlan.cloneName(gr.name(), "r1");
    assertThat(names.indexOf(clone)).isEqualTo(names.indexOf("gradients/rg2") + 1);
    assertThat(names.indexOf("gradients/mg2")).isEqualTo(names.indexOf(clone) + 1);
    assertThat(rw.op(rw.opOrThrow("gradients/mg2").inputs().get(1).op()).name()).isEqualTo(clone);
    assertThat(MemorySimulator.simulate(rw, order).peakBytes()).isEqualTo(18 * KB);
  }

  @Test
  void aGenerousLimitChangesNothing() {
    RecomputePlanner.Result r = RecomputePlanner.underBudget(twoLayers("Relu"), 1 << 20, 0.8);
    assertThat(r.needed()).isFalse();
    assertThat(r.plan().isEmpty()).isTrue();
  }

  @Test
  void randomOpsAreNeverRecomputed() {
    DataflowGraph g = twoLayers("RandomUniform");
    assertThat(RecomputePlanner.heuristic(g).groups())
        .allSatisfy(gr -> assertThat(gr.ops()).doesNotContain("r1"));
    assertThatThrownBy(() -> RecomputePlanner.manual(g, Set.of("r1")))
        .hasMessageContaining("cannot be recomputed");
    assertThatThrownBy(() -> RecomputePlanner.manual(g, Set.of("w")))
        .hasMessageContaining("cannot be recomputed");
  }

  @Test
  void impossibleLimitNamesTheSmallestBudget() {
    // hand-computed: recomputation brings the peak down to 18 KB and no lower
    assertThatThrownBy(() -> RecomputePlanner.underBudget(twoLayers("Relu"), 10 * KB, 1.0))
        .isInstanceOfSatisfying(PlanningException.class,
            e -> assertThat(e.smallestBudgetBytes()).isEqualTo(18 * KB))
        .hasMessageContaining("smallest budget");
    // the named budget works, a byte less does not
    assertThat(RecomputePlanner.underBudget(twoLayers("Relu"), 18 * KB, 1.0).plan().isEmpty())
        .isFalse();
    assertThatThrownBy(() -> RecomputePlanner.underBudget(twoLayers("Relu"), 18 * KB - 1, 1.0))
        .isInstanceOf(PlanningException.class);
  }

  @Test
  void manualGroupsFollowTheNamedOps() {
    DataflowGraph chain = SyntheticGraphs.trainingChain(6, 1 << 20, 1 << 10);
    RecomputePlan p = RecomputePlanner.manual(chain, Set.of("f2", "f3"));
    // f2 and f3 are connected: one group, in topological order, re-pointed into the backward
    assertThat(p.groups()).hasSize(1);
    assertThat(p.groups().get(0).ops()).containsExactly("f2", "f3");
    assertThat(p.groups().get(0).repoints()).extracting(RecomputePlan.Repoint::consumer)
        .allMatch(c -> c.startsWith("gradients/"));
    DataflowGraph rw = RecomputeApplier.apply(chain, p);
    assertThat(rw.size()).isEqualTo(chain.size() + 2);
    assertThat(RecomputePlanner.peak(chain, p))
        .isLessThan(RecomputePlanner.peak(chain, RecomputePlan.empty()));
  }

  /**
   * bestEffort keeps the peaks it simulated with the graph and walks them again for another
   * budget: on one graph asked for budgets in any order, each answer is the one a fresh graph
   * gives, simulations counted alike.
   */
  @Test
  void bestEffortAnswersEveryBudgetAsAFreshGraphDoes() {
    DataflowGraph shared = layers(10);
    long full = RecomputePlanner.peak(shared, RecomputePlan.empty());
    double[] fractions = {0.9, 0.5, 0.7, 0.3, 0.95, 0.6};
    int groupsSeen = 0;
    for (double f : fractions) {
      long budget = (long) (full * f);
      RecomputePlanner.Result a = RecomputePlanner.bestEffort(shared, budget, 1.0);
      RecomputePlanner.Result b = RecomputePlanner.bestEffort(layers(10), budget, 1.0);
      assertThat(a.plan()).isEqualTo(b.plan());
      assertThat(a.predictedPeak()).isEqualTo(b.predictedPeak());
      assertThat(a.simulations()).isEqualTo(b.simulations());
      groupsSeen = Math.max(groupsSeen, a.plan().groups().size());
    }
    assertThat(groupsSeen).isGreaterThan(2);
  }
}
