package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.graph.Levels;
import java.util.List;
import org.junit.jupiter.api.Test;

class MemorySimulatorTest {
  private static final long KB = 1024;

  /**
   * w (4 KB, variable) ; x (feed, 1 KB) -> a (2 KB) -> b (3 KB) -> c (1 KB), and d reads a and c.
   * Pinned: w + x = 5 KB. While b runs: a + b live = 5 KB -> 10 KB. While c runs: a, b, c live
   * (a waits for d) = 6 KB -> 11 KB. b is freed after c, so while d runs: a, c, d(1 KB) = 4 KB ->
   * 9 KB. Peak 11 KB at c.
   */
  @Test
  void peakFollowsReferenceCounts() {
    DataflowGraph g = DataflowGraph.builder()
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(4 * KB))
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x", "w"), Tensor.ofBytes(2 * KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(3 * KB))
        .op("c", "Relu", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(KB))
        .op("d", "AddV2", OpCategory.BACKWARD, List.of("a", "c"), Tensor.ofBytes(KB))
        .build();
    MemoryProfile p = MemorySimulator.simulate(g, Levels.of(g).schedule());
    assertThat(p.pinnedBytes()).isEqualTo(5 * KB);
    assertThat(p.peakBytes()).isEqualTo(11 * KB);
    assertThat(g.op(p.order()[p.peakAt()]).name()).isEqualTo("c");
    assertThat(p.timeline()).containsExactly(5 * KB, 5 * KB, 7 * KB, 10 * KB, 11 * KB, 9 * KB);
    // the floor: pinned 5 KB + largest working set (b: a 2 KB in + b 3 KB out = 5 KB) = 10 KB
    assertThat(LowerBound.of(g)).isEqualTo(10 * KB);
    assertThat(LowerBound.largestOpName(g)).isEqualTo("b");
  }

  @Test
  void livenessAndDistances() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(2 * KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(KB))
        .op("c", "Relu", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(KB))
        .op("d", "AddV2", OpCategory.BACKWARD, List.of("a", "c"), Tensor.ofBytes(KB))
        .build();
    Levels lv = Levels.of(g);
    var iv = dev.lms4j.core.memory.Liveness.intervals(g, lv.schedule());
    // x is a feed (resident); a lives from position 1 to d at 4
    assertThat(iv).hasSize(4);
    assertThat(iv.get(0).tensor().op()).isEqualTo(1);
    assertThat(iv.get(0).length()).isEqualTo(3);
    var edges = dev.lms4j.core.memory.Liveness.distances(g, lv);
    // a -> d spans levels 1 -> 4
    assertThat(edges).anySatisfy(e -> {
      assertThat(g.op(e.consumer()).name()).isEqualTo("d");
      assertThat(e.tensor().op()).isEqualTo(1);
      assertThat(e.distance()).isEqualTo(3);
    });
    var h = dev.lms4j.core.memory.Liveness.distanceHistogram(g, lv);
    // distances 1,1,1,3,1: four edges in bucket 0 ([1,2)), one in bucket 1 ([2,4))
    assertThat(h.get(0)[0]).isEqualTo(4);
    assertThat(h.get(1)[0]).isEqualTo(1);
    assertThat(h.get(1)[1]).isEqualTo(2 * KB);
  }

  @Test
  void shapeOnlyReadersDoNotKeepBuffersAlive() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(KB))
        .op("c", "Relu", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(KB))
        .op("s", "Shape", OpCategory.BACKWARD, List.of("a", "^c"), Tensor.ofBytes(8))
        .build();
    MemoryProfile p = MemorySimulator.simulate(g, Levels.of(g).schedule());
    // a (8 KB) dies after b: peak is x + a + b = 10 KB, not more later
    assertThat(p.peakBytes()).isEqualTo(10 * KB);
    assertThat(p.timeline()[3]).isEqualTo(3 * KB);
  }

  @Test
  void rejectsOrdersThatBreakDependencies() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(KB))
        .build();
    assertThatThrownBy(() -> MemorySimulator.simulate(g, new int[] {1, 0}))
        .hasMessageContaining("before its input x");
  }

  @Test
  void cyclesAndDanglingInputsAreRejected() {
    assertThatThrownBy(() -> DataflowGraph.builder()
        .op("a", "Relu", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(KB)).build())
        .hasMessageContaining("cycle");
    assertThatThrownBy(() -> DataflowGraph.builder()
        .op("a", "Relu", OpCategory.FORWARD, List.of("nope"), Tensor.ofBytes(KB)).build())
        .hasMessageContaining("unknown op 'nope'");
  }

  @Test
  void levelsAreLongestPathsFromSources() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(KB))
        .op("c", "AddV2", OpCategory.FORWARD, List.of("x", "b"), Tensor.ofBytes(KB))
        .op("d", "Relu", OpCategory.FORWARD, List.of("x", "^c"), Tensor.ofBytes(KB))
        .build();
    Levels lv = Levels.of(g);
    assertThat(lv.asArray()).containsExactly(0, 1, 2, 3, 4);
    assertThat(lv.count()).isEqualTo(5);
  }
}
