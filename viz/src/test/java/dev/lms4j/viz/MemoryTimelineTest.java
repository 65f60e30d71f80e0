package dev.lms4j.viz;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.schedule.Scheduling;
import org.junit.jupiter.api.Test;

class MemoryTimelineTest {
  @Test
  void afterPeakIsThePlannersPredictionAndEventsAreWherePlannedOpsRun() {
    // 12 layers of 2-4 MiB activations: 90 MiB without LMS; at 50 MiB (target 40 MiB) the
    // auto flow recomputes 20 ops (10 BiasAdd+Relu groups) and swaps 7 tensors
    Fixtures.Planned p = Fixtures.auto(Fixtures.mlp(12), 50 * Fixtures.MIB);
    assertThat(p.swap().swapOuts()).hasSize(7);
    assertThat(p.recompute().clonedOps()).isEqualTo(20);

    MemoryTimeline t = MemoryTimeline.of(p.model(), p.swap(), p.recompute());

    assertThat(t.rewritten()).isTrue();
    assertThat(t.before().peakBytes()).isEqualTo(90 * Fixtures.MIB)
        .isEqualTo(SwapAutoTuner.simulatePeak(p.model(), SwapPlan.empty(SwapParams.defaults())));
    assertThat(t.after().peakBytes()).isEqualTo(p.predictedPeak()).isEqualTo(39 * Fixtures.MIB);
    assertThat(t.swapOuts()).hasSize(p.swap().swapOuts().size());
    assertThat(t.swapIns()).hasSize(p.swap().swapInCount());
    assertThat(t.recomputes()).hasSize(p.recompute().clonedOps());
    // the after schedule has the original ops plus one per inserted op
    assertThat(t.after().order()).hasSize(p.model().size() + p.swap().addedOps()
        + p.recompute().clonedOps());
    // every swap-in runs after the first swap-out (it reads one), every recompute after the
    // forward pass's loss
    assertThat(t.swapIns()[0]).isGreaterThan(t.swapOuts()[0]);
    int lossAt = position(t, p.model(), "loss");
    assertThat(java.util.Arrays.stream(t.recomputes()).min().orElseThrow()).isGreaterThan(lossAt);
    assertThat(t.at(t.after().peakAt())).isEqualTo(t.after().peakBytes());
  }

  @Test
  void recomputeOnlyMatchesTheRecomputePlannersPeak() {
    DataflowGraph g = Fixtures.mlp(6);
    RecomputePlan rp = RecomputePlanner.heuristic(g);
    MemoryTimeline t = MemoryTimeline.of(g, null, rp);
    assertThat(t.after().peakBytes()).isEqualTo(RecomputePlanner.peak(g, rp))
        .isLessThan(t.before().peakBytes());
    assertThat(t.swapOuts()).isEmpty();
    assertThat(t.recomputes()).hasSize(rp.clonedOps());
  }

  @Test
  void aScheduledGraphIsDrawnAfterTheOriginal() {
    // 8 branches: 46 KiB levelled, 26 KiB once the AddNs are chained and scheduled (by hand in
    // core's SchedulingTest); no LMS plan on top
    DataflowGraph g = Fixtures.branches(8);
    Scheduling.Result s = Scheduling.apply(g, Scheduling.Scheduler.BEST);
    assertThat(s.changed()).isTrue();
    MemoryTimeline t = MemoryTimeline.of(g, s.graph(), null, null);
    assertThat(t.rewritten()).isTrue();
    assertThat(t.before().peakBytes()).isEqualTo(46 * 1024).isEqualTo(s.peakBefore());
    assertThat(t.after().peakBytes()).isEqualTo(26 * 1024).isEqualTo(s.peakAfter());
    assertThat(t.after().order()).hasSize(s.graph().size());
    assertThat(t.swapOuts()).isEmpty();
    assertThat(t.recomputes()).isEmpty();
  }

  @Test
  void withoutAPlanAfterIsBefore() {
    DataflowGraph g = Fixtures.mlp(3);
    MemoryTimeline t = MemoryTimeline.of(g, SwapPlan.empty(SwapParams.defaults()),
        RecomputePlan.empty());
    assertThat(t.rewritten()).isFalse();
    assertThat(t.after()).isSameAs(t.before());
    assertThat(t.swapOuts()).isEmpty();
    assertThat(t.swapIns()).isEmpty();
    assertThat(t.recomputes()).isEmpty();
  }

  /** Position of an original op in the rewritten schedule (original ops keep their ids). */
  private static int position(MemoryTimeline t, DataflowGraph model, String op) {
    int id = model.opOrThrow(op).id();
    int[] order = t.after().order();
    for (int i = 0; i < order.length; i++) {
      if (order[i] == id) {
        return i;
      }
    }
    throw new AssertionError(op + " is not in the schedule");
  }
}
