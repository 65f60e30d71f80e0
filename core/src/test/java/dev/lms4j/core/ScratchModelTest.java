package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.ScratchEstimates;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanApplier;
import dev.lms4j.core.plan.PlanSimulator;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TflmsSwapPlanner;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Kernel scratch in the memory model: measured, estimated, simulated, kept through rewrites. */
class ScratchModelTest {
  private static final long K = 1024;

  /**
   * x (feed, 4 KB) -> a = Relu(x) (8 KB) -> b = Relu(a) (8 KB) -> c = Relu(b) (8 KB).
   * Without scratch the peak is while b runs: x 4 + a 8 + b 8 = 20 KB (c: 4 + 8 + 8 = 20 too).
   * With 10 KB of scratch on a: 4 + 8 + 10 = 22 KB at a; with 16 KB on c: 4 + 8 + 8 + 16 = 36.
   */
  private static DataflowGraph chain() {
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(4 * K))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * K))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(8 * K))
        .op("c", "Relu", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(8 * K))
        .build();
  }

  private static long peak(DataflowGraph g) {
    return MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes();
  }

  @Test
  void scratchIsAddedWhileItsOpRunsOnly() {
    DataflowGraph g = chain();
    assertThat(peak(g)).isEqualTo(20 * K);
    DataflowGraph a10 = g.withScratch(Map.of("a", 10 * K));
    assertThat(peak(a10)).isEqualTo(22 * K);
    var prof = MemorySimulator.simulate(a10, Levels.of(a10).schedule());
    assertThat(prof.timeline()).containsExactly(4 * K, 22 * K, 20 * K, 20 * K);
    assertThat(peak(g.withScratch(Map.of("a", 10 * K, "c", 16 * K)))).isEqualTo(36 * K);
    // the smallest budget any plan could reach includes the scratch too
    assertThat(LowerBound.of(g.withScratch(Map.of("c", 16 * K)))).isEqualTo(4 * K + 32 * K);
  }

  @Test
  void withScratchIgnoresUnknownNamesRejectsNegativesAndKeepsTheRest() {
    DataflowGraph g = chain().withScratch(Map.of("a", 10 * K, "_SOURCE", 99L));
    assertThat(g.opOrThrow("a").scratch()).isEqualTo(10 * K);
    assertThat(g.opOrThrow("b").scratch()).isEqualTo(Op.SCRATCH_UNKNOWN);
    DataflowGraph again = g.withScratch(Map.of("b", 0L));
    assertThat(again.opOrThrow("a").scratch()).isEqualTo(10 * K);
    assertThat(again.opOrThrow("b").scratch()).isZero();
    DataflowGraph c = chain();
    assertThat(c.withScratch(Map.of())).isSameAs(c); // an empty map changes nothing
    Map<String, Long> bad = new HashMap<>();
    bad.put("a", -5L);
    assertThatThrownBy(() -> chain().withScratch(bad))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("a");
    // a builder copy keeps measured scratch
    assertThat(g.toBuilder().build().opOrThrow("a").scratch()).isEqualTo(10 * K);
  }

  @Test
  void measuredZeroReplacesTheEstimateAndWithoutScratchIsTheOldModel() {
    // a float64 filter gradient (oneDNN takes float32 only, so TensorFlow's own kernel runs on
    // every CPU) of two 2 MiB activations with a 3x3 kernel: it asks for a col buffer of 4
    // images (30 MiB / 8 B / 1245184-element work units) of 256 x 2304 doubles
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(),
            new Tensor("float64", new long[] {4, 16, 16, 256}, 2L << 20, false))
        .op("dy", "Placeholder", OpCategory.FORWARD, List.of(),
            new Tensor("float64", new long[] {4, 16, 16, 256}, 2L << 20, false))
        .op("fs", "Const", OpCategory.FORWARD, List.of(),
            new Tensor("int32", new long[] {4}, 16, false))
        .op("dw", "Conv2DBackpropFilter", OpCategory.BACKWARD, List.of("x", "fs", "dy"),
            new Tensor("float64", new long[] {3, 3, 256, 256}, 9L * 256 * 256 * 8, false))
        .build();
    int dw = g.opOrThrow("dw").id();
    long col = 4L * 256 * 2304 * 8;
    assertThat(g.scratchBytes(dw)).isEqualTo(col)
        .isEqualTo(ScratchEstimates.estimate(g, g.op(dw)));
    assertThat(g.withScratch(Map.of("dw", 0L)).scratchBytes(dw)).isZero();
    assertThat(g.withoutScratch().scratchBytes(dw)).isZero();
    // resident feeds and constant: 4 MiB + 16 B; dw's output 4.5 MiB plus its col buffer
    long resident = (4L << 20) + 16;
    assertThat(peak(g)).isEqualTo(resident + 9L * 256 * 256 * 8 + col);
    assertThat(peak(g.withoutScratch())).isEqualTo(resident + 9L * 256 * 256 * 8);
  }

  @Test
  void planSimulatorAgreesWithTheSimulatorWithScratch() {
    DataflowGraph base = SyntheticGraphs.trainingChain(12, 1 << 20, 96 << 10);
    Map<String, Long> scratch = new HashMap<>();
    for (Op op : base.ops()) {
      if (op.id() % 3 == 0) {
        scratch.put(op.name(), (long) (op.id() % 7) << 19);
      }
    }
    DataflowGraph g = base.withScratch(scratch);
    assertThat(peak(g)).isGreaterThan(peak(base));
    PlanSimulator fast = new PlanSimulator(g);
    for (int th : new int[] {0, 2, 7}) {
      SwapPlan p = TflmsSwapPlanner.plan(g, SwapParams.builder().swapoutThreshold(th)
          .swapinAhead(2).swapinGroupby(2).build());
      DataflowGraph r = PlanApplier.apply(g, p);
      assertThat(fast.peak(p)).as("threshold %d", th).isEqualTo(peak(r));
    }
  }

  @Test
  void aRecomputedCloneHasItsOriginalsScratch() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(4 * K))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * K))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(8 * K))
        .op("ga", "ReluGrad", OpCategory.BACKWARD, List.of("b", "a"), Tensor.ofBytes(8 * K))
        .build()
        .withScratch(Map.of("a", 3 * K));
    RecomputePlan plan = new RecomputePlan(List.of(new RecomputePlan.Group("g0", List.of("a"),
        List.of(new RecomputePlan.Repoint("ga", "a", 0)), List.of("b"), 8 * K)));
    DataflowGraph r = RecomputeApplier.apply(g, plan);
    Op clone = r.opOrThrow(RecomputePlan.cloneName("g0", "a"));
    assertThat(clone.scratch()).isEqualTo(3 * K);
    assertThat(r.scratchBytes(clone.id())).isEqualTo(3 * K);
    // the consumer re-pointed to the clone keeps its own (unmeasured) state
    assertThat(r.opOrThrow("ga").scratch()).isEqualTo(Op.SCRATCH_UNKNOWN);
  }
}
