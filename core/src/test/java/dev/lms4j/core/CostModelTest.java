package dev.lms4j.core;

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
  private static Tensor f32(long... shape) {
    long n = 4;
    for (long d : shape) {
      n *= d;
    }
    return new Tensor("float32", shape, n, false);
  }

  /**
   * x [8,32,32,16] -> Conv2D with filter [3,3,16,32] -> [8,32,32,32]:
   * 2 * (8*32*32*32) * (3*3*16) = 2 * 262144 * 144 = 75,497,472 FLOPs.
   * MatMul [64,128] x [128,256] -> [64,256]: 2 * 64*256 * 128 = 4,194,304 FLOPs.
   * The filter gradient [3,3,16,32] from grad [8,32,32,32]: 2 * 262144 * 144, as the forward.
   */
  private final DataflowGraph g = DataflowGraph.builder()
      .op("x", "Placeholder", OpCategory.FORWARD, List.of(), f32(8, 32, 32, 16))
      .op("w", "Const", OpCategory.FORWARD, List.of(), f32(3, 3, 16, 32))
      .op("conv", "Conv2D", OpCategory.FORWARD, List.of("x", "w"), f32(8, 32, 32, 32))
      .op("a", "Placeholder", OpCategory.FORWARD, List.of(), f32(64, 128))
      .op("b", "Const", OpCategory.FORWARD, List.of(), f32(128, 256))
      .op("mm", "MatMul", OpCategory.FORWARD, List.of("a", "b"), f32(64, 256))
      .op("sizes", "Const", OpCategory.FORWARD, List.of(), new Tensor("int32", new long[] {4}, 16,
          false))
      .op("gradients/dw", "Conv2DBackpropFilter", OpCategory.BACKWARD,
          List.of("x", "sizes", "conv"), f32(3, 3, 16, 32))
      .op("relu", "Relu", OpCategory.FORWARD, List.of("conv"), f32(8, 32, 32, 32))
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
    assertThat(cm.swapMs(swap)).isCloseTo(3.03, within(1e-9));
    RecomputePlan rp = new RecomputePlan(List.of(new RecomputePlan.Group("g0", List.of("relu"),
        List.of(), List.of(), 0)));
    assertThat(cm.recomputeMs(g, rp)).isCloseTo(2.097152, within(1e-9));
    double base = cm.computeMs(g);
    assertThat(cm.stepMs(g, swap, rp)).isCloseTo(base + 3.03 + 2.097152, within(1e-9));
    CostModel overlapped = new CostModel(1e9, 1e9, 0, 1e9, 10, true, Map.of());
    assertThat(overlapped.stepMs(g, swap, RecomputePlan.empty())).isEqualTo(base);
  }
}
