package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.plan.SqrtCheckpointPlanner;
import org.junit.jupiter.api.Test;

class SqrtCheckpointPlannerTest {
  @Test
  void keepsAboutSqrtNCheckpointsAndLowersThePeak() {
    // 16 layers: f1..f16 and the loss are recomputable forward ops (17); sqrt(17) ~ 4 segments
    // of 5 ops, so f5, f10, f15 and the loss are kept, 13 ops are marked; f16 alone is read by
    // no backward op (gradients/gi reads f(i-1)), so its group is dropped: 12 ops recomputed in 3
    // groups (f1-f4, f6-f9, f11-f14)
    DataflowGraph g = SyntheticGraphs.trainingChain(16, 1 << 20, 1 << 10);
    RecomputePlan p = SqrtCheckpointPlanner.plan(g);
    assertThat(p.clonedOps()).isEqualTo(12);
    assertThat(p.groups()).extracting(gr -> gr.ops().size()).containsExactly(4, 4, 4);
    assertThat(p.groups().stream().flatMap(gr -> gr.ops().stream()))
        .doesNotContain("f5", "f10", "f15", "loss", "f16").contains("f1", "f4", "f6", "f14");
    long before = RecomputePlanner.peak(g, RecomputePlan.empty());
    long after = RecomputePlanner.peak(g, p);
    // without it all 16 activations (+ feed) are alive when the backward pass starts
    assertThat(before).isGreaterThanOrEqualTo(17L << 20);
    // with it: the feed, 3 checkpoints, one recomputed segment (4) and two gradients stay under
    // 10 activations
    assertThat(after).isLessThanOrEqualTo(10L << 20);
  }

  @Test
  void oneSegmentPerOpRecomputesNothing() {
    DataflowGraph g = SyntheticGraphs.trainingChain(4, 1 << 20, 1 << 10);
    assertThat(SqrtCheckpointPlanner.plan(g, 100).isEmpty()).isTrue();
  }
}
