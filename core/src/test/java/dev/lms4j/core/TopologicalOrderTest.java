package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * The topological order every graph is built with (Kahn's algorithm, the smallest ready id
 * first, on a heap of plain ints) is the one the general method gives with the natural order, on
 * graphs whose ids are not in topological order (ops listed in a shuffled order, data and
 * control edges from ops ranked earlier).
 */
class TopologicalOrderTest {

  @Property(tries = 200)
  void theBuiltInOrderIsTheSmallestReadyIdFirst(@ForAll @IntRange(min = 1, max = 80) int n,
      @ForAll long seed) {
    Random rnd = new Random(seed);
    List<Integer> rank = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      rank.add(i);
    }
    Collections.shuffle(rank, rnd); // op i is the rank.get(i)-th in a topological order
    String[] byRank = new String[n];
    for (int i = 0; i < n; i++) {
      byRank[rank.get(i)] = "op" + i;
    }
    DataflowGraphBuilder b = DataflowGraph.builder();
    for (int i = 0; i < n; i++) {
      int r = rank.get(i);
      List<String> in = new ArrayList<>();
      for (int k = 0; k < 3 && r > 0; k++) {
        if (rnd.nextBoolean()) {
          in.add(byRank[rnd.nextInt(r)]);
        }
      }
      b.op("op" + i, r == 0 ? "Placeholder" : "Add", OpCategory.FORWARD, in,
          Tensor.ofBytes(64));
    }
    for (int i = 0; i < n; i++) {
      int r = rank.get(i);
      if (r > 0 && rnd.nextInt(4) == 0) {
        b.controlEdge(byRank[rnd.nextInt(r)], "op" + i);
      }
    }
    DataflowGraph g = b.build();

    int[] order = g.topologicalOrder();
    assertThat(order).containsExactly(g.topologicalOrder(Comparator.naturalOrder()));
    int[] pos = new int[n];
    for (int i = 0; i < n; i++) {
      pos[order[i]] = i;
    }
    for (int v = 0; v < n; v++) {
      for (int p : g.predecessors(v)) {
        assertThat(pos[p]).isLessThan(pos[v]);
      }
    }
  }

  @Test
  void aCycleIsRefusedWithTheOpsOnIt() {
    assertThatThrownBy(() -> DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(64))
        .op("a", "Add", OpCategory.FORWARD, List.of("x", "b"), Tensor.ofBytes(64))
        .op("b", "Add", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(64))
        .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("cycle through [a, b]");
  }
}
