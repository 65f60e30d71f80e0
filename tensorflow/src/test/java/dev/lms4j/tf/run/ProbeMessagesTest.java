package dev.lms4j.tf.run;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * The size of a failed allocation, read from the messages TensorFlow's allocators print; when a
 * probe passes; the tighter limit a probe at the edge is run at.
 */
class ProbeMessagesTest {
  @Test
  void failedAllocationSizes() {
    // the BFC allocator's line as the worker supervisor keeps it (lenet at 88 MiB)
    assertThat(Probe.failedAllocation("OOM under a budget of 88 MiB: ran out of memory trying "
        + "to allocate 12.25MiB (rounded to 12845056)requested by op gradients/MatMul_3"))
        .isEqualTo(12_845_056L);
    assertThat(Probe.failedAllocation("ran out of memory trying to allocate 1.5KiB"))
        .isEqualTo(1536L);
    // the op's exception: 512 x 28 x 28 x 4 floats
    assertThat(Probe.failedAllocation("OOM when allocating tensor with shape[512,28,28,4] and "
        + "type float on /job:localhost/replica:0/task:0/device:CPU:0"))
        .isEqualTo(512L * 28 * 28 * 4 * 4);
    assertThat(Probe.failedAllocation("worker exited with code 134")).isEqualTo(-1);
    assertThat(Probe.failedAllocation(null)).isEqualTo(-1);
  }

  /** The op whose request failed, as the worker's out-of-memory message names it. */
  @Test
  void theFailedOpIsReadFromTheMessage() {
    assertThat(Probe.failedOp("OOM under a budget of 180 MiB: ran out of memory trying to "
        + "allocate 97.66MiB (rounded to 102400000)requested by op table_init/RandomUniform; "
        + "allocator at the failure: regions 128, 2 of a 180 MiB limit"))
        .isEqualTo("table_init/RandomUniform");
    assertThat(Probe.failedOp("ran out of memory trying to allocate 20.0KiB (rounded to 20480)"
        + "requested by op gradients/MatMul_1")).isEqualTo("gradients/MatMul_1");
    assertThat(Probe.failedOp("OOM when allocating tensor with shape[512,28,28,4]")).isNull();
    assertThat(Probe.failedOp(null)).isNull();
  }

  /** A small failed allocation is written in KiB: "allocating 0.0 MiB" said nothing. */
  @Test
  void sizesUnderATenthOfAMiBAreWrittenInKiB() {
    assertThat(Probe.mib(12_544)).isEqualTo("12.3 KiB");
    assertThat(Probe.mib(104_856)).isEqualTo("102.4 KiB");
    assertThat(Probe.mib(104_857)).isEqualTo("0.1 MiB");
    assertThat(Probe.mib(12_845_056)).isEqualTo("12.3 MiB");
    assertThat(Probe.mib(0)).isEqualTo("0.0 MiB");
  }

  @Test
  void aGraphWithCollectivesCannotRunAlone() {
    var node = org.tensorflow.proto.NodeDef.newBuilder();
    var plain = org.tensorflow.proto.GraphDef.newBuilder()
        .addNode(node.setName("a").setOp("MatMul").build()).build();
    var collective = plain.toBuilder()
        .addNode(node.setName("b").setOp("CollectiveReduceV2").build()).build();
    assertThat(Probe.canRunAlone(plain)).isTrue();
    assertThat(Probe.canRunAlone(collective)).isFalse();
  }

  @Test
  void theTighterLimitIsTheHeadroomBelowTheBudgetInWholeMiBAndAtLeastOneMiB() {
    long mib = 1 << 20;
    // 27 x 0.98 = 26.46 -> 26; 100 x 0.98 = 98; 50 x 0.98 = 49; 2 -> 1 (at least 1 MiB less)
    assertThat(Probe.tighterLimit(27 * mib)).isEqualTo(26 * mib);
    assertThat(Probe.tighterLimit(100 * mib)).isEqualTo(98 * mib);
    assertThat(Probe.tighterLimit(50 * mib)).isEqualTo(49 * mib);
    assertThat(Probe.tighterLimit(2 * mib)).isEqualTo(mib);
    // a budget's part MiB are not used (the BFC limit is in whole MiB)
    assertThat(Probe.tighterLimit(27 * mib + mib / 2)).isEqualTo(26 * mib);
    assertThat(Probe.tighterLimit(mib)).isEqualTo(-1);
    // the budget a run under 25 MiB is the margin of: 26 (26 x 0.98 = 25.48 -> 25); under 98
    // MiB: 100 (99 x 0.98 = 97.02 -> 97, 100 -> 98)
    assertThat(Probe.withMargin(25 * mib)).isEqualTo(26);
    assertThat(Probe.withMargin(98 * mib)).isEqualTo(100);
    for (long b = 2; b < 400; b++) {
      long at = Probe.withMargin(b * mib);
      assertThat(Probe.tighterLimit(at * mib)).as("%d MiB", b).isGreaterThanOrEqualTo(b * mib);
      assertThat(Probe.tighterLimit((at - 1) * mib)).as("%d MiB", b).isLessThan(b * mib);
    }
  }

  @Test
  void aProbeAtTheEdgePassesOnlyWhereItAlsoRanUnderTheTighterLimit() {
    long mib = 1 << 20;
    long budget = 27 * mib;
    // traced 26.9 MiB under 27 (the corpus densenet's tflms plan): less than 2% (0.54 MiB) free
    Probe.Attempt edge = new Probe.Attempt(1, "plan", "tflms-swap", 0.85, 22 * mib, true, false,
        budget - mib / 10, -1, null, -1, false);
    assertThat(edge.passed(budget)).isFalse();
    assertThat(edge.withTighter(26 * mib, false).passed(budget)).isFalse();
    assertThat(edge.withTighter(26 * mib, true).passed(budget)).isTrue();
    // 2% free passes without a second run; a run that did not fit never passes
    Probe.Attempt roomy = new Probe.Attempt(1, "plan", "tflms-swap", 0.85, 22 * mib, true, false,
        budget - (long) (0.02 * budget), -1, null, -1, false);
    assertThat(roomy.passed(budget)).isTrue();
    Probe.Attempt oom = new Probe.Attempt(1, "plan", "tflms-swap", 0.85, 22 * mib, false, true,
        -1, mib, "OOM", 26 * mib, true);
    assertThat(oom.passed(budget)).isFalse();
  }

  /**
   * A probe plans first at the ratio set on the planner, else at its own default: the margin
   * the probe measures need not be kept twice; a plan nothing checks keeps the static default.
   */
  @Test
  void theProbePlansAtItsOwnDefaultRatioUnlessOneIsSet() {
    long budget = 64L << 20;
    dev.lms4j.tf.Lms unset = dev.lms4j.tf.Lms.builder().budget(budget).build();
    assertThat(unset.memRatioSet()).isFalse();
    assertThat(unset.budget().memRatio()).isEqualTo(dev.lms4j.core.plan.Budget.DEFAULT_MEM_RATIO);
    assertThat(Probe.Options.of(budget, unset).memRatio()).isEqualTo(Probe.PROBED_MEM_RATIO)
        .isGreaterThan(dev.lms4j.core.plan.Budget.DEFAULT_MEM_RATIO);
    for (double r : new double[] {0.65, 0.8, 1.0}) {
      dev.lms4j.tf.Lms set = dev.lms4j.tf.Lms.builder().budget(budget).memRatio(r).build();
      assertThat(set.memRatioSet()).isTrue();
      assertThat(Probe.Options.of(budget, set).memRatio()).isEqualTo(r);
    }
    // a re-plan's planner holds the ratio it was given
    assertThat(unset.withBudget(new dev.lms4j.core.plan.Budget(budget, 0.7)).memRatioSet())
        .isTrue();
  }
}
