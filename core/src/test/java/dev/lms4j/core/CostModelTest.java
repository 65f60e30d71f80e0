package dev.lms4j.core;

import dev.lms4j.core.plan.PlanCosts;
import static dev.lms4j.core.graph.Tensor.float32;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class CostModelTest {
  /**
   * x [8,32,32,16] -> Conv2D with filter [3,3,16,32] -> [8,32,32,32]:
   * 2 * (8*32*32*32) * (3*3*16) = 2 * 262144 * 144 = 75,497,472 FLOPs.
   * MatMul [64,128] x [128,256] -> [64,256]: 2 * 64*256 * 128 = 4,194,304 FLOPs.
   * The filter gradient [3,3,16,32] from grad [8,32,32,32]: 2 * 262144 * 144, as the forward.
   */
  private final DataflowGraph g = DataflowGraph.builder()
      .op("x", "Placeholder", OpCategory.FORWARD, List.of(), float32(8, 32, 32, 16))
      .op("w", "Const", OpCategory.FORWARD, List.of(), float32(3, 3, 16, 32))
      .op("conv", "Conv2D", OpCategory.FORWARD, List.of("x", "w"), float32(8, 32, 32, 32))
      .op("a", "Placeholder", OpCategory.FORWARD, List.of(), float32(64, 128))
      .op("b", "Const", OpCategory.FORWARD, List.of(), float32(128, 256))
      .op("mm", "MatMul", OpCategory.FORWARD, List.of("a", "b"), float32(64, 256))
      .op("sizes", "Const", OpCategory.FORWARD, List.of(), new Tensor("int32", new long[] {4}, 16,
          false))
      .op("gradients/dw", "Conv2DBackpropFilter", OpCategory.BACKWARD,
          List.of("x", "sizes", "conv"), float32(3, 3, 16, 32))
      .op("relu", "Relu", OpCategory.FORWARD, List.of("conv"), float32(8, 32, 32, 32))
      .build();

  @Test
  void flopsOfMatmulsAndConvolutions() {
    assertThat(CostModel.flops(g, g.opOrThrow("conv"))).isEqualTo(75_497_472.0);
    assertThat(CostModel.flops(g, g.opOrThrow("mm"))).isEqualTo(4_194_304.0);
    assertThat(CostModel.flops(g, g.opOrThrow("gradients/dw"))).isEqualTo(75_497_472.0);
    assertThat(CostModel.flops(g, g.opOrThrow("relu"))).isEqualTo(262_144.0);
  }

  @Test
  void opTimesFromRatesOrFromAProfile() {
    CostModel cm = new CostModel(1e9, 1e9, 0, 1e9, 0, false, Map.of());
    // conv: 75.5 MFLOP at 1 GFLOP/s = 75,497 us; bytes 2 MiB + 18 KiB + 1 MiB... less than that
    assertThat(cm.opUs(g, g.opOrThrow("conv"))).isCloseTo(75_497.472, within(1e-6));
    // relu: 262,144 FLOPs = 262 us, but it touches 2 x 1 MiB = 2,097 us at 1 GB/s: memory-bound
    assertThat(cm.opUs(g, g.opOrThrow("relu"))).isCloseTo(2_097.152, within(1e-6));
    assertThat(cm.withProfile(Map.of("relu", 7.0)).opUs(g, g.opOrThrow("relu"))).isEqualTo(7.0);
    assertThat(cm.opUs(g, g.opOrThrow("x"))).isZero();
  }

  @Test
  void swapsAndRecomputationAddTime() {
    CostModel cm = new CostModel(1e9, 1e9, 0, 1e9, 10, false, Map.of());
    SwapPlan swap = new SwapPlan(SwapParams.defaults(), List.of(new SwapPlan.SwapOut("conv", 0,
        "float32", 1_000_000, "so", List.of(new SwapPlan.SwapIn("si0", List.of("relu"),
            List.of()), new SwapPlan.SwapIn("si1", List.of("gradients/dw"), List.of())),
        List.of())), List.of());
    // out once and in twice: 3 x (1 MB at 1 GB/s = 1000 us + 10 us latency) = 3.03 ms
    assertThat(PlanCosts.swapMs(cm, swap)).isCloseTo(3.03, within(1e-9));
    RecomputePlan rp = new RecomputePlan(List.of(new RecomputePlan.Group("g0", List.of("relu"),
        List.of(), List.of(), 0)));
    assertThat(PlanCosts.recomputeMs(cm, g, rp)).isCloseTo(2.097152, within(1e-9));
    double base = cm.computeMs(g);
    assertThat(PlanCosts.stepMs(cm, g, swap, rp)).isCloseTo(base + 3.03 + 2.097152, within(1e-9));
    // with overlap a transfer hides behind the compute that may run while it is in flight
    // (levelled schedule: conv, mm | swap-out | si0, si1 | relu, dw): the swap-out behind mm
    // (4.19 ms >= 1.01 ms), si1 behind relu (2.10 ms, dw waits for it); si0 runs right before
    // relu and hides (almost) nothing: about one transfer, 1.01 ms, remains of the 3.03 ms
    CostModel overlapped = new CostModel(1e9, 1e9, 0, 1e9, 10, true, Map.of());
    double t = PlanCosts.stepMs(overlapped, g, swap, RecomputePlan.empty());
    assertThat(t - base).isBetween(1.0, 1.1);
  }

  @Test
  void tiersHaveTheirOwnBandwidthAndTracesLoad() throws Exception {
    CostModel cm = CostModel.defaults().withTier(dev.lms4j.core.memory.Tier.HOST, 10e9, 1)
        .withTier(dev.lms4j.core.memory.Tier.DISK, 1e9, 100);
    assertThat(cm.transferUs(1_000_000, dev.lms4j.core.memory.Tier.HOST)).isCloseTo(101,
        within(1e-9));
    assertThat(cm.transferUs(1_000_000, dev.lms4j.core.memory.Tier.DISK)).isCloseTo(1100,
        within(1e-9));
    java.nio.file.Path f = java.nio.file.Files.createTempFile("trace", ".tsv");
    java.nio.file.Files.write(f, List.of("100\trelu\t1\t1\t1\t42", "bad line",
        "150\tconv\t1\t1\t1\t7", "170\tconv\t1\t1\t1\t3"));
    Map<String, Double> us = CostModel.loadTrace(f);
    assertThat(us).containsEntry("relu", 42.0).containsEntry("conv", 10.0).hasSize(2);
    assertThat(cm.withProfile(us).opUs(g, g.opOrThrow("relu"))).isEqualTo(42.0);
    java.nio.file.Files.delete(f);
  }

  @Test
  void calibratedDefaultsPriceSmallConvolutionsAboveTheSwapOfTheirOutput() {
    CostModel cm = CostModel.defaults();
    // conv: 75,497,472 FLOPs / 200e9 = 377.5 us, + 350 us (per conv or matmul) + 5 us
    assertThat(cm.opUs(g, g.opOrThrow("conv"))).isCloseTo(732.487, within(1e-3));
    assertThat(cm.opUs(g, g.opOrThrow("gradients/dw"))).isCloseTo(732.487, within(1e-3));
    // relu: no compute overhead; 2 x 1 MiB at 30 GB/s = 69.9 us, + 5 us
    assertThat(cm.opUs(g, g.opOrThrow("relu"))).isCloseTo(2 * 1048576 / 30e9 * 1e6 + 5,
        within(1e-6));
    // the conv's 1 MiB output at the native path's 8 GB/s, out and back in: 2 x (131 + 20) us
    // = 302 us, so swapping it is cheaper than recomputing it (732 us); with the old flat 250
    // GFLOP/s and no overhead the conv cost 307 us and recomputing it looked as cheap
    double swap = 2 * cm.withSwapBandwidth(8e9).transferUs(1048576, dev.lms4j.core.memory.Tier.HOST);
    assertThat(swap).isCloseTo(302.144, within(1e-3));
    assertThat(cm.opUs(g, g.opOrThrow("conv"))).isGreaterThan(2 * swap);
  }

  @Test
  void batchNormsTakeThreePassesOverTheirData() {
    DataflowGraph bn = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), float32(8, 32, 32, 32))
        .op("scale", "Const", OpCategory.FORWARD, List.of(), float32(32))
        .op("offset", "Const", OpCategory.FORWARD, List.of(), float32(32))
        .op("bn", "FusedBatchNormV3", OpCategory.FORWARD, List.of("x", "scale", "offset"),
            float32(8, 32, 32, 32))
        .op("add", "AddV2", OpCategory.FORWARD, List.of("x", "x"), float32(8, 32, 32, 32))
        .build();
    CostModel cm = CostModel.defaults();
    double add = cm.opUs(bn, bn.opOrThrow("add")) - 5;
    // bn reads x (1 MiB) and two 128-byte vectors and writes 1 MiB: 3 x that at 30 GB/s; add
    // reads x twice and writes 1 MiB, one pass
    double bnBytes = 2 * 1048576 + 2 * 128;
    assertThat(cm.opUs(bn, bn.opOrThrow("bn"))).isCloseTo(3 * bnBytes / 30e9 * 1e6 + 5,
        within(1e-6));
    assertThat(add).isCloseTo(3 * 1048576 / 30e9 * 1e6, within(1e-6));
  }
}
