package dev.lms4j.optimal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.plan.TensorPolicy;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The exact reference reads the same tensor policy as every planner. */
class OptimalPolicyTest {
  @Test
  void theUsersFiltersShapeTheProblem() {
    DataflowGraph g = SyntheticGraphs.trainingChain(6, 1 << 20, 64 << 10);
    OptimalPlanner.Options o = OptimalPlanner.Options.of(8L << 20);
    OptimalPlanner.Problem free = OptimalPlanner.problem(g, o);
    TensorPolicy.Spec spec = new TensorPolicy.Spec(Set.of("f2"), Set.of(), Set.of(), Set.of(),
        Set.of(), Set.of(), Set.of(), Set.of(), Set.of(), Map.of(), 0);
    OptimalPlanner.Problem filtered = OptimalPlanner.problem(g, o, TensorPolicy.of(g, spec));
    assertThat(free.items()).filteredOn(it -> it.name().equals("f2:0")).singleElement()
        .satisfies(it -> assertThat(it.swappable()).isTrue());
    assertThat(filtered.items()).filteredOn(it -> it.name().equals("f2:0")).singleElement()
        .satisfies(it -> {
          assertThat(it.swappable()).isFalse();
          assertThat(it.recomputable()).isTrue();
        });
    // nothing else changed
    assertThat(filtered.items()).filteredOn(it -> !it.name().equals("f2:0"))
        .extracting(OptimalPlanner.Item::swappable)
        .containsExactlyElementsOf(free.items().stream().filter(it -> !it.name().equals("f2:0"))
            .map(OptimalPlanner.Item::swappable).toList());
  }
}
