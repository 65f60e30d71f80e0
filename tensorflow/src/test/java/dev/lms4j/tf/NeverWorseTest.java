package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import org.junit.jupiter.api.Test;

/**
 * lms4j never refuses a budget the graph as given is predicted to fit: where no plan keeps the
 * memory ratio's margin (weights and the largest op already take more than 80% of the budget,
 * as on the corpus's sparse embedding at TensorFlow's own minimum), the graph is left as it was.
 */
class NeverWorseTest {
  @Test
  void aBudgetTheGraphFitsWithoutTheMarginLeavesItAsItWas() {
    // weights dominate: 5 layers of 1024 x 1024 floats at batch 2
    TrainingGraph tg = TinyNet.build(2, 1024, 4);
    LmsResult free = Lms.builder().budget(1L << 30).build().rewrite(tg);
    long before = free.predictedPeakBefore();
    long floor = LowerBound.of(free.model());
    // what TensorFlow's allocator needs for the graph as it is (whole chunks, regions)
    long need = BfcReplay.smallestMib(free.model(), Levels.of(free.model()).schedule(), 4096)
        << 20;
    assertThat(need).isGreaterThan(before);
    // the case: at that budget the floor is above 80% of it, so every planner refuses it,
    // while the graph as it is fits
    assertThat(floor).isGreaterThan((long) (need * 0.8));
    for (LmsMode m : java.util.List.of(LmsMode.AUTO, LmsMode.SWAP, LmsMode.TFLMS,
        LmsMode.REMAT)) {
      LmsResult at = Lms.builder().budget(need).mode(m).build().rewrite(tg);
      assertThat(at.rewritten()).as(m.cliName()).isFalse();
      assertThat(at.graphDef()).as(m.cliName()).isEqualTo(tg.graphDef());
      assertThat(at.predictedPeakAfter()).isEqualTo(before);
    }
    // between the live bytes' peak and the allocator's need the graph as given would not fit
    // TensorFlow's allocator: the refusal stands (before the allocator model it was taken)
    assertThatThrownBy(() -> Lms.builder().budget(before).build().rewrite(tg))
        .isInstanceOf(PlanningException.class);
    // a byte below the graph's own peak, the refusal stands, naming the smallest budget
    assertThatThrownBy(() -> Lms.builder().budget(before - 1).build().rewrite(tg))
        .isInstanceOfSatisfying(PlanningException.class,
            e -> assertThat(e.smallestBudgetBytes()).isGreaterThan(before - 1));
  }
}
