package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanSimulator;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Feeds in host memory ({@link DataflowGraph#hostFeeds()}) cost the device nothing. */
class HostFeedsTest {
  private static final long MIB = 1L << 20;

  /** x (feed, 8 MiB), w (variable, 1 MiB), y = MatMul(x, w) (2 MiB), held init constant 1 MiB. */
  private static DataflowGraph graph(boolean hostFeeds) {
    return DataflowGraph.builder().hostFeeds(hostFeeds)
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(8 * MIB))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(MIB))
        .op("y", "MatMul", OpCategory.FORWARD, List.of("x", "w"), Tensor.ofBytes(2 * MIB))
        .op("w_init_value", BfcReplay.HELD, OpCategory.FORWARD, List.of(),
            Tensor.persistent(MIB))
        .build();
  }

  @Test
  void aFeedInHostMemoryCostsTheDeviceNothing() {
    DataflowGraph host = graph(true);
    DataflowGraph device = graph(false);
    int[] order = Levels.of(host).schedule();
    // w 1 + held 1 + y 2 MiB; with the feed in the device, 8 MiB more
    assertThat(MemorySimulator.simulate(host, order).peakBytes()).isEqualTo(4 * MIB);
    assertThat(MemorySimulator.simulate(device, order).peakBytes()).isEqualTo(12 * MIB);
    assertThat(LowerBound.of(host)).isEqualTo(4 * MIB);
    assertThat(LowerBound.of(device)).isEqualTo(12 * MIB);
    assertThat(new PlanSimulator(host).peak(SwapPlan.empty(SwapParams.defaults())))
        .isEqualTo(4 * MIB);
    assertThat(BfcReplay.replay(host, order, 4 * MIB).fits()).isTrue();
    assertThat(BfcReplay.replay(device, order, 11 * MIB).fits()).isFalse();
    // the setting survives the graph's edits
    assertThat(host.withoutScratch().hostFeeds()).isTrue();
    assertThat(host.toBuilder().build().hostFeeds()).isTrue();
  }
}
