package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The levelled order puts an op made from constants alone that grappler does not fold (a dropout
 * mask of a constant shape) right before its first reader, not at the top of the step; the
 * swap-out lms4j adds for it follows it there.
 */
class LevelsTest {
  private static final long KB = 1024;

  /**
   * A chain x -> h1 -> h2 -> h3 -> h4 (1 KB each) and a mask m = Cast(RandomUniform(shape)) of
   * 8 KB read by h4's product p. As soon as possible, m would be made at level 2 and held while
   * h1..h3 run; sunk, it is made at level 4, right before p at 5.
   */
  private static DataflowGraphBuilder maskedChain() {
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("shape", "Const", OpCategory.FORWARD, List.of(), Tensor.persistent(8))
        .op("h1", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(KB))
        .op("h2", "Relu", OpCategory.FORWARD, List.of("h1"), Tensor.ofBytes(KB))
        .op("h3", "Relu", OpCategory.FORWARD, List.of("h2"), Tensor.ofBytes(KB))
        .op("h4", "Relu", OpCategory.FORWARD, List.of("h3"), Tensor.ofBytes(KB))
        .op("u", "RandomUniform", OpCategory.FORWARD, List.of("shape"), Tensor.ofBytes(8 * KB))
        .op("m", "Cast", OpCategory.FORWARD, List.of("u"), Tensor.ofBytes(8 * KB))
        .op("p", "Mul", OpCategory.FORWARD, List.of("h4", "m"), Tensor.ofBytes(KB));
  }

  @Test
  void anOpMadeFromConstantsAloneRunsRightBeforeItsFirstReader() {
    DataflowGraph g = maskedChain().build();
    Levels lv = Levels.of(g);
    int p = g.opOrThrow("p").id();
    assertThat(lv.level(g.opOrThrow("m").id())).isEqualTo(lv.level(p) - 1);
    assertThat(lv.level(g.opOrThrow("u").id())).isEqualTo(lv.level(p) - 2);
    assertThat(lv.count()).isEqualTo(6);
    // while h3 runs only h2 and h3 are alive (and the resident feed and shape): as soon as
    // possible, m's 8 KB would be held there too
    int[] order = lv.schedule();
    MemoryProfile prof = MemorySimulator.simulate(g, order);
    int at = java.util.Arrays.asList(java.util.Arrays.stream(order).boxed().toArray())
        .indexOf(g.opOrThrow("h3").id());
    assertThat(prof.timeline()[at]).isEqualTo(prof.pinnedBytes() + 2 * KB);
  }

  @Test
  void aSwapOutOfASunkTensorFollowsItInsteadOfHoldingItUp() {
    DataflowGraph g = maskedChain()
        .op("lms4j/swapout/m_0", "_LmsSwapOut", OpCategory.FORWARD, List.of("m"),
            Tensor.ofBytes(8 * KB))
        .build();
    Levels lv = Levels.of(g);
    int m = g.opOrThrow("m").id();
    assertThat(lv.level(m)).isEqualTo(lv.level(g.opOrThrow("p").id()) - 1);
    assertThat(lv.level(g.opOrThrow("lms4j/swapout/m_0").id())).isEqualTo(lv.level(m) + 1);
  }

  /**
   * What grappler folds into a constant (a {@code Fill} of constants) keeps its level: it does
   * not run in the step, and moving it would only shift the levels planners count distances in.
   * A shape read of a sunk mask does not hold the mask up: it follows it.
   */
  @Test
  void aFoldedOpKeepsItsLevelAndAShapeReadFollowsTheMask() {
    DataflowGraph g = maskedChain()
        .op("value", "Const", OpCategory.FORWARD, List.of(), Tensor.persistent(4))
        .op("zeros", "Fill", OpCategory.FORWARD, List.of("shape", "value"), Tensor.ofBytes(KB))
        .op("q", "AddV2", OpCategory.FORWARD, List.of("p", "zeros"), Tensor.ofBytes(KB))
        .op("gradients/Shape", "Shape", OpCategory.BACKWARD, List.of("m"), Tensor.ofBytes(8))
        .op("gradients/r", "Reshape", OpCategory.BACKWARD, List.of("q", "gradients/Shape"),
            Tensor.ofBytes(KB))
        .build();
    Levels lv = Levels.of(g);
    assertThat(lv.level(g.opOrThrow("zeros").id())).isEqualTo(1);
    int m = g.opOrThrow("m").id();
    assertThat(lv.level(m)).isEqualTo(lv.level(g.opOrThrow("p").id()) - 1);
    assertThat(lv.level(g.opOrThrow("gradients/Shape").id())).isEqualTo(lv.level(m) + 1);
  }

  @Test
  void opsReadingAFeedOrAVariableKeepTheirLevel() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(KB))
        .op("t", "Transpose", OpCategory.FORWARD, List.of("w"), Tensor.ofBytes(KB))
        .op("y", "MatMul", OpCategory.FORWARD, List.of("b", "t"), Tensor.ofBytes(KB))
        .build();
    Levels lv = Levels.of(g);
    // a read of a variable is not moved: an update the order happens to put after it must
    // still see it first
    assertThat(lv.level(g.opOrThrow("t").id())).isEqualTo(1);
    assertThat(lv.level(g.opOrThrow("a").id())).isEqualTo(1);
  }
}
