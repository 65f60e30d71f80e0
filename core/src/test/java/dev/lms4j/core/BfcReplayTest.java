package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The BFC allocator's regions and unsplit chunks, which the sum of live bytes misses. */
class BfcReplayTest {
  private static final long MIB = 1 << 20;

  /**
   * A 40 MiB variable gets a 64 MiB region (regions double from 2 MiB until the request fits)
   * and the whole chunk (64 MiB is less than twice 40). The step's 30 MiB output then needs a
   * region of its own of at least 30 MiB: 94 MiB in all, where the live bytes add up to 70.
   */
  @Test
  void unsplitChunksAndRegionGrowthSetTheSmallestLimit() {
    DataflowGraph g = DataflowGraph.builder()
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(40 * MIB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("w"), Tensor.ofBytes(30 * MIB))
        .build();
    int[] order = Levels.of(g).schedule();
    assertThat(MemorySimulator.simulate(g, order).peakBytes()).isEqualTo(70 * MIB);
    BfcReplay.Result ok = BfcReplay.replay(g, order, 94 * MIB);
    assertThat(ok.fits()).isTrue();
    assertThat(ok.peakInUse()).isEqualTo(94 * MIB); // 64 MiB chunk + the whole 30 MiB region
    BfcReplay.Result no = BfcReplay.replay(g, order, 93 * MIB);
    assertThat(no.fits()).isFalse();
    assertThat(no.failedOp()).isEqualTo("a");
    assertThat(no.failedBytes()).isEqualTo(30 * MIB);
    assertThat(BfcReplay.smallestMib(g, order, 1024)).isEqualTo(94);
    assertThat(BfcReplay.smallestMib(g, order, 80)).isEqualTo(-1);
  }

  /** Freed chunks coalesce and are reused: a chain of equal activations needs two of them. */
  @Test
  void freedChunksAreReused() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(1 * MIB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * MIB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(8 * MIB))
        .op("c", "Relu", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(8 * MIB))
        .op("d", "Relu", OpCategory.FORWARD, List.of("c"), Tensor.ofBytes(8 * MIB))
        .build();
    int[] order = Levels.of(g).schedule();
    BfcReplay.Result r = BfcReplay.replay(g, order, 1024 * MIB);
    assertThat(r.fits()).isTrue();
    // regions: 2 MiB (x takes half: 2 MiB is twice its request, so the chunk is split), 8 MiB
    // (a: the region size doubles until a fits), 8 MiB (b); c and d reuse a's and b's chunks
    assertThat(r.regionBytes()).isEqualTo(18 * MIB);
    assertThat(r.peakInUse()).isEqualTo(17 * MIB);
  }
}
