package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.plan.Rematerializer;
import dev.lms4j.core.schedule.AddNChains;
import dev.lms4j.core.schedule.Scheduling;
import dev.lms4j.core.schedule.Scheduling.Scheduler;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SchedulingTest {
  private static final long KB = 1024;

  /**
   * One activation a (4 KB) feeds {@code k} branches b_i = MatMul(a, w_i); their sum s = AddN(b_i)
   * gives the loss. The backward pass computes gb_i = MatMul(gs, w_i) for every branch and sums
   * them in ga = AddN(gb_i): grappler's case of many gradients summed by one AddN. In the
   * levelled order all k gradients are live before the AddN runs; chained and scheduled, each is
   * added as it arrives.
   */
  static DataflowGraph branches(int k) {
    DataflowGraphBuilder b = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("w0", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("a", "MatMul", OpCategory.FORWARD, List.of("x", "w0"), Tensor.ofBytes(4 * KB));
    List<String> bs = new ArrayList<>();
    List<String> gbs = new ArrayList<>();
    for (int i = 1; i <= k; i++) {
      b.op("w" + i, "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB));
      b.op("b" + i, "MatMul", OpCategory.FORWARD, List.of("a", "w" + i), Tensor.ofBytes(4 * KB));
      bs.add("b" + i);
    }
    b.op("s", "AddN", OpCategory.FORWARD, bs, Tensor.ofBytes(4 * KB));
    b.op("loss", "Mean", OpCategory.FORWARD, List.of("s"), Tensor.ofBytes(4));
    b.op("gradients/gs", "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes(4 * KB));
    for (int i = 1; i <= k; i++) {
      b.op("gradients/gb" + i, "MatMul", OpCategory.BACKWARD, List.of("gradients/gs", "w" + i),
          Tensor.ofBytes(4 * KB));
      gbs.add("gradients/gb" + i);
    }
    b.op("gradients/ga", "AddN", OpCategory.BACKWARD, gbs, Tensor.ofBytes(4 * KB));
    b.op("gradients/dw0", "MatMul", OpCategory.BACKWARD, List.of("gradients/ga", "x"),
        Tensor.ofBytes(KB));
    b.op("train/apply0", "ApplyGradientDescent", OpCategory.OPTIMIZER,
        List.of("w0", "gradients/dw0"), Tensor.persistent(KB));
    return b.build();
  }

  /**
   * k = 8: pinned x + 9 weights = 10 KB. Levelled, gb1..gb8 run one after the other at one level
   * before the AddN: at gb8, gs + gb1..gb8 = 9 x 4 = 36 KB on top: 46 KB. Chained and scheduled, a gradient is added as it arrives:
   * gs, the running sum, the next gradient and their sum, 16 KB on top. The forward AddN gets the
   * same treatment (a, b_i, partial sums).
   */
  @Test
  void addNChainsAndSchedulingLowerThePeakOfManyGradients() {
    DataflowGraph g = branches(8);
    Scheduling.Result none = Scheduling.apply(g, Scheduler.NONE);
    assertThat(none.changed()).isFalse();
    assertThat(none.graph()).isSameAs(g);
    assertThat(none.peakBefore()).isEqualTo(46 * KB);
    for (Scheduler s : List.of(Scheduler.LIST, Scheduler.DFS, Scheduler.POSTORDER,
        Scheduler.BEST)) {
      Scheduling.Result r = Scheduling.apply(g, s);
      assertThat(r.peakBefore()).isEqualTo(46 * KB);
      assertThat(r.peakAfter()).as(s.name()).isLessThan(r.peakBefore());
      assertThat(r.chains()).extracting(AddNChains.Chain::op)
          .containsExactly("s", "gradients/ga");
      assertThat(r.edges()).isNotEmpty();
      // the planners see the schedule: the levelled peak of the returned graph is its peak
      assertThat(Scheduling.levelledPeak(r.graph())).isEqualTo(r.peakAfter());
      assertThat(RecomputePlanner.peak(r.graph(),
          dev.lms4j.core.plan.RecomputePlan.empty())).isEqualTo(r.peakAfter());
    }
    assertThat(Scheduling.apply(g, Scheduler.BEST).peakAfter()).isEqualTo(26 * KB);
  }

  /** Without AddNs and with the levelled order already best, nothing is changed. */
  @Test
  void neverRaisesThePeak() {
    DataflowGraph g = SyntheticGraphs.trainingChain(20, 4 * KB, KB);
    for (Scheduler s : Scheduler.values()) {
      Scheduling.Result r = Scheduling.apply(g, s);
      assertThat(r.peakAfter()).as(s.name()).isLessThanOrEqualTo(r.peakBefore());
      if (!r.changed()) {
        assertThat(r.graph()).isSameAs(g);
      }
    }
  }

  /** The rematerializer runs the scheduling step first when asked, and plans on its graph. */
  @Test
  void rematerializerPlansOnTheScheduledGraph() {
    DataflowGraph g = branches(8);
    Rematerializer.Result r = Rematerializer.plan(g, 40 * KB,
        Rematerializer.Options.defaults().withScheduler(Scheduler.BEST));
    assertThat(r.scheduling().changed()).isTrue();
    assertThat(r.graph()).isSameAs(r.scheduling().graph());
    assertThat(r.peakBefore()).isEqualTo(r.scheduling().peakAfter());
    assertThat(r.needed()).isFalse();
  }
}
