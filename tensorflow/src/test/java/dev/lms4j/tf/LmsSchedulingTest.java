package dev.lms4j.tf;

import dev.lms4j.core.plan.LmsMode;
import static dev.lms4j.tf.TfTests.nodes;
import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.schedule.AddNChains;
import dev.lms4j.core.schedule.Scheduling;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.NodeDef;

/** The scheduling step of {@link Lms} ({@link LmsBuilder#scheduler}) on real graphs. */
class LmsSchedulingTest {

  /**
   * AddNRewriterTest's branchy net: the gradient of h sums four branch gradients (two AddNs of
   * four inputs). With the best scheduler they become chains of AddV2s, the schedule is
   * enforced, the simulated peak drops, and the losses are bit-identical to the original's
   * (here the branch gradients arrive in the AddN's input order, so the chain adds them in the
   * order AddN's kernel does; in general the last bits may differ, see AddNRewriter).
   */
  @Test
  void schedulingAndAddNChainsLowerThePeakOfABranchyNet() {
    TrainingGraph net = AddNRewriterTest.branchyNet();
    LmsResult r = Lms.builder().mode(LmsMode.OFF)
        .scheduler(Scheduling.Scheduler.BEST).build().rewrite(net);
    Scheduling.Result s = r.scheduling();
    assertThat(s).isNotNull();
    assertThat(s.chains()).isNotEmpty();
    assertThat(s.peakAfter()).isLessThan(s.peakBefore());
    assertThat(s.peakBefore()).isEqualTo(r.predictedPeakBefore());
    Map<String, NodeDef> n = nodes(r.graphDef());
    for (AddNChains.Chain c : s.chains()) {
      assertThat(n.get(c.op()).getOp()).isEqualTo("AddV2");
      assertThat(n).containsKey(AddNChains.addName(c.op(), 1));
    }
    // the planner worked on the scheduled graph: its model holds the chains
    assertThat(r.model().op(AddNChains.addName(s.chains().get(0).op(), 1))).isPresent();
    List<Double> base = TfTests.losses(net.graphDef(), net.manifest());
    List<Double> scheduled = TfTests.losses(r.graphDef(), net.manifest());
    assertThat(scheduled).containsExactlyElementsOf(base);
    // a plan that recomputes under the schedule keeps it and the losses
    // (ScheduleWithRecomputeTest has the U-Net case that once closed a cycle)
    LmsResult remat = Lms.builder().mode(LmsMode.REMAT)
        .scheduler(Scheduling.Scheduler.BEST).build().rewrite(net);
    assertThat(remat.recompute().isEmpty()).isFalse();
    assertThat(remat.scheduling()).isNotNull();
    assertThat(TfTests.losses(remat.graphDef(), net.manifest())).containsExactlyElementsOf(base);
  }

  /**
   * TinyNet has no AddN of more than two inputs: scheduling only adds control edges (or
   * nothing), never raises the simulated peak, and the losses are bit-identical.
   */
  @Test
  void schedulingWithoutAddNsKeepsTheLossesBitIdentical() {
    TrainingGraph net = TinyNet.build(64, 128, 4);
    for (Scheduling.Scheduler sc : List.of(Scheduling.Scheduler.LIST,
        Scheduling.Scheduler.BEST)) {
      LmsResult r = Lms.builder().mode(LmsMode.REMAT).scheduler(sc).build()
          .rewrite(net);
      long peak = r.scheduling() == null ? r.predictedPeakBefore() : r.scheduling().peakAfter();
      assertThat(peak).isLessThanOrEqualTo(r.predictedPeakBefore());
      if (r.scheduling() != null) {
        assertThat(r.scheduling().chains()).isEmpty();
      }
      assertThat(TfTests.losses(r.graphDef(), net.manifest()))
          .containsExactlyElementsOf(TfTests.losses(net.graphDef(), net.manifest()));
    }
  }
}
