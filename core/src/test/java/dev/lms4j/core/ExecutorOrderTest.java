package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.ExecutorOrder;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * TensorFlow's executor, in the caller's thread, runs ready ops first in, first out; an op
 * finishing makes its data readers ready before the ops that wait on it through control edges.
 * So an op left out of lms4j's chain runs as soon as its inputs are there, ahead of the chain's
 * next op: the shape of the corpus DenseNet's backward pass, where a filter gradient (left out:
 * oneDNN merges it with the bias gradient) reads the incoming gradient through an identity
 * grappler removes, and the input gradient is the chain's next op.
 */
class ExecutorOrderTest {
  private static final long KB = 1024;

  /**
   * x -> a (8 KB, the activation the filter gradient reads) -> dy -> id = Identity(dy);
   * f = Conv2DBackpropFilter(a, id) (unchained), i = Conv2DBackpropInput(w, dy) (8 KB, chained
   * right after dy), then z after i. The ids put i before f, so the levelled schedule (one level
   * for both, ascending id) runs i first, holding a while i allocates.
   */
  private static DataflowGraph backward() {
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KB))
        .op("dy", "ReluGrad", OpCategory.BACKWARD, List.of("x"), Tensor.ofBytes(KB))
        .op("id", "Identity", OpCategory.BACKWARD, List.of("dy"), Tensor.ofBytes(KB))
        .op("i", "Conv2DBackpropInput", OpCategory.BACKWARD, List.of("w", "dy"),
            Tensor.ofBytes(8 * KB))
        .op("f", "Conv2DBackpropFilter", OpCategory.BACKWARD, List.of("a", "id"),
            Tensor.ofBytes(KB))
        .op("z", "Relu", OpCategory.BACKWARD, List.of("i"), Tensor.ofBytes(KB))
        .build();
  }

  private static int[] ids(DataflowGraph g, String... names) {
    return Arrays.stream(names).mapToInt(n -> g.opOrThrow(n).id()).toArray();
  }

  private static boolean[] marks(DataflowGraph g, String... names) {
    boolean[] m = new boolean[g.size()];
    for (int v : ids(g, names)) {
      m[v] = true;
    }
    return m;
  }

  private static List<String> names(DataflowGraph g, int[] order) {
    return Arrays.stream(order).mapToObj(v -> g.op(v).name()).toList();
  }

  @Test
  void withNothingLeftOutTheOrderIsTheChain() {
    DataflowGraph g = backward();
    int[] chain = Levels.of(g).schedule();
    assertThat(ExecutorOrder.of(g, chain, null)).containsExactly(chain);
    assertThat(ExecutorOrder.of(g, chain, new boolean[g.size()])).containsExactly(chain);
  }

  @Test
  void anUnchainedOpRunsAsSoonAsItsInputsAreThereAheadOfTheChainsNextOp() {
    DataflowGraph g = backward();
    int[] chain = Levels.of(g).schedule();
    // the levelled schedule runs the input gradient first
    assertThat(names(g, chain).indexOf("i")).isLessThan(names(g, chain).indexOf("f"));
    int[] order = ExecutorOrder.of(g, chain, marks(g, "id", "f"), marks(g, "id"));
    assertThat(names(g, order)).containsSubsequence("dy", "id", "f", "i", "z");
    // the filter gradient frees the 8 KB activation before the input gradient asks for 8 KB
    long levelled = MemorySimulator.simulate(g, chain).peakBytes();
    long executor = MemorySimulator.simulate(g, order).peakBytes();
    assertThat(levelled - executor).isEqualTo(8 * KB);
  }

  @Test
  void anOpTheIdentityFeedsJoinsTheQueueBehindTheChainsNextOpUnlessTheIdentityIsRemoved() {
    DataflowGraph g = backward();
    int[] chain = Levels.of(g).schedule();
    // a real kernel: the identity runs after dy, the input gradient was made ready with it and
    // runs next, and the filter gradient only after that
    int[] queued = ExecutorOrder.of(g, chain, marks(g, "id", "f"), null);
    assertThat(names(g, queued)).containsSubsequence("dy", "id", "i", "f");
    // removed by grappler: the filter gradient reads dy itself
    int[] removed = ExecutorOrder.of(g, chain, marks(g, "id", "f"), marks(g, "id"));
    assertThat(names(g, removed)).containsSubsequence("dy", "f", "i");
  }

  /**
   * The input gradient reads dy through a data edge too, so TensorFlow may take it first: the
   * second order runs it ahead of the filter gradient, and needs the 8 KB more.
   */
  @Test
  void theChainsNextOpFirstIsTheOtherOrderWhereItReadsTheFinishedOp() {
    DataflowGraph g = backward();
    int[] chain = Levels.of(g).schedule();
    int[] second = ExecutorOrder.of(g, chain, marks(g, "id", "f"), marks(g, "id"), true);
    assertThat(names(g, second)).containsSubsequence("dy", "i", "f", "z");
    assertThat(MemorySimulator.simulate(g, second).peakBytes()
        - MemorySimulator.simulate(g, ExecutorOrder.of(g, chain, marks(g, "id", "f"),
            marks(g, "id"), false)).peakBytes()).isEqualTo(8 * KB);
    // where the chain's next op does not read the finished op, there is no other order: z
    // waits for i, the op before it in the chain, through its data edge only when i is next
    DataflowGraph h = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("p", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(KB))
        .op("u", "Relu", OpCategory.FORWARD, List.of("p"), Tensor.ofBytes(KB))
        .op("q", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(KB))
        .build();
    int[] c = ids(h, "x", "p", "q", "u");
    assertThat(names(h, ExecutorOrder.of(h, c, marks(h, "u"), null, true)))
        .containsExactlyElementsOf(names(h, ExecutorOrder.of(h, c, marks(h, "u"), null, false)))
        .containsExactly("x", "p", "u", "q");
  }

  /**
   * Pinned (SerialOrder gives the chain's next op a control edge from it), the filter gradient
   * runs ahead of the input gradient in the second order too.
   */
  @Test
  void aPinnedOpRunsAheadOfTheChainsNextOpInBothOrders() {
    DataflowGraph g = backward();
    int[] chain = Levels.of(g).schedule();
    for (boolean chainFirst : new boolean[] {false, true}) {
      int[] order = ExecutorOrder.of(g, chain, marks(g, "id", "f"), marks(g, "id"),
          marks(g, "f"), chainFirst);
      assertThat(names(g, order)).as("chain first: " + chainFirst)
          .containsSubsequence("dy", "f", "i", "z");
    }
  }

  @Test
  void theChainKeepsItsOrderAndEveryOpRunsOnce() {
    DataflowGraph g = backward();
    int[] chain = Levels.of(g).schedule();
    int[] order = ExecutorOrder.of(g, chain, marks(g, "id", "f"), marks(g, "id"));
    assertThat(order).hasSize(g.size()).doesNotHaveDuplicates();
    List<String> chained = names(g, chain).stream().filter(n -> !n.equals("id")
        && !n.equals("f")).toList();
    assertThat(names(g, order).stream().filter(chained::contains).toList())
        .containsExactlyElementsOf(chained);
  }

  @Test
  void aChainAgainstTheGraphsEdgesIsRefused() {
    DataflowGraph g = backward();
    // z before i: z would wait on i through its data edge and i on z through the chain
    int[] chain = ids(g, "x", "w", "a", "dy", "id", "z", "i", "f");
    assertThatThrownBy(() -> ExecutorOrder.of(g, chain, marks(g, "f"), null))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("cycle");
  }
}
