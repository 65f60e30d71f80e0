package dev.lms4j.core.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The step's results grappler folds into constants ({@link BfcReplay#heldAtRun}): held from the
 * executor's start, not allocated as the step runs; what depends on a feed is not folded. (The
 * allocator model itself is checked against TensorFlow's recorded placements in the tensorflow
 * module's {@code AllocatorLogTest}.)
 */
class FoldedConstantsTest {
  private static final long KIB = 1 << 10;
  private static final long MIB = 1 << 20;

  /**
   * A shape read TensorFlow folds into a constant: the step's executor holds it from its start,
   * so it does not sit in the step's free memory. x (1 MiB, resident) fills half the first
   * region; a (512 KiB) and the shape of a (read at the end) follow it. Held from the start, the
   * shape's chunk sits beside x, and when a is freed its chunk joins the free rest of the region:
   * c (768 KiB) fits there, under 3 MiB (b took a region of the 1 MiB left). Allocated as the
   * step ran, the shape's chunk would sit between a's chunk and the rest and c would not fit.
   */
  @Test
  void aFoldedShapeReadIsHeldFromTheStepsStart() {
    DataflowGraph g = shapeRead("VariableV2", Tensor.persistent(1 * MIB));
    assertThat(BfcReplay.heldAtRun(g)).containsExactly(false, false, true, false, false, false);
    int[] order = Levels.of(g).schedule();
    assertThat(Arrays.stream(order).mapToObj(v -> g.op(v).name()))
        .containsExactly("x", "a", "s", "b", "c", "r");
    BfcReplay.Result r = BfcReplay.replay(g, order, 3 * MIB, BfcReplay.Layout.GRAPH_ORDER, 1);
    assertThat(r.fits()).isTrue();
    assertThat(r.regionBytes()).isEqualTo(3 * MIB);
  }

  /**
   * The same graph with x fed: grappler's constant folding does not take a fed tensor's shape
   * as known, so the shape read runs in the step ({@link DataflowGraph#shapeDynamic}), its chunk
   * sits between a's and the rest of the region, and c does not fit under 3 MiB.
   */
  @Test
  void aShapeReadOfAFedTensorRunsInTheStep() {
    DataflowGraph g = shapeRead("Placeholder", Tensor.ofBytes(1 * MIB));
    assertThat(g.shapeDynamic()).containsExactly(true, true, true, true, true, true);
    assertThat(BfcReplay.heldAtRun(g)).containsOnly(false);
    int[] order = Levels.of(g).schedule();
    BfcReplay.Result r = BfcReplay.replay(g, order, 3 * MIB, BfcReplay.Layout.GRAPH_ORDER, 1);
    assertThat(r.fits()).isFalse();
    assertThat(r.failedOp()).isEqualTo("c");
  }

  /**
   * Where the graph says which shape reads grappler leaves to the step (the importer's
   * {@link DataflowGraph#dynamicShapeReads()}), a read it does not name is a constant though its
   * tensor comes from a feed (a shape a reshape to a constant shape fixed), and one it names runs
   * in the step with what is computed from it.
   */
  @Test
  void theShapeReadsTheGraphNamesRunInTheStepAndNoOthers() {
    DataflowGraph known = shapeRead("Placeholder", Tensor.ofBytes(1 * MIB)).toBuilder()
        .dynamicShapeReads(java.util.Set.of()).build();
    assertThat(known.shapeDynamic()).containsOnly(false);
    assertThat(BfcReplay.heldAtRun(known)).containsExactly(false, false, true, false, false,
        false);
    int[] order = Levels.of(known).schedule();
    assertThat(BfcReplay.replay(known, order, 3 * MIB, BfcReplay.Layout.GRAPH_ORDER, 1).fits())
        .isTrue();

    DataflowGraph dynamic = shapeRead("Placeholder", Tensor.ofBytes(1 * MIB)).toBuilder()
        .dynamicShapeReads(java.util.Set.of("s")).build();
    assertThat(dynamic.shapeDynamic()).containsExactly(false, false, true, false, false, true);
    assertThat(BfcReplay.heldAtRun(dynamic)).containsOnly(false);
    // kept by an edit of the graph
    assertThat(dynamic.withoutScratch().dynamicShapeReads()).containsExactly("s");
  }

  private static DataflowGraph shapeRead(String xType, Tensor x) {
    return DataflowGraph.builder()
        .op("x", xType, OpCategory.FORWARD, List.of(), x)
        .op("a", "MatMul", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(512 * KIB))
        .op("s", "Shape", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(16))
        .op("b", "MatMul", OpCategory.FORWARD, List.of("a", "^s"), Tensor.ofBytes(1 * MIB))
        .op("c", "MatMul", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(768 * KIB))
        .op("r", "MatMul", OpCategory.FORWARD, List.of("c", "s"), Tensor.ofBytes(16))
        .build();
  }

  /**
   * What grappler does not fold stays in the step: a result larger than its largest constant
   * (100 KiB: a ZerosLike of 1 MiB), what is computed from a random op, and constants and
   * variables, which are resident anyway.
   */
  @Test
  void onlySmallFoldableResultsAreHeld() {
    DataflowGraph g = DataflowGraph.builder()
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(1 * MIB))
        .op("k", "Const", OpCategory.FORWARD, List.of(), Tensor.persistent(16))
        .op("z", "ZerosLike", OpCategory.FORWARD, List.of("w"), Tensor.ofBytes(1 * MIB))
        .op("n", "ShapeN", OpCategory.FORWARD, "", List.of("w", "z"),
            List.of(Tensor.ofBytes(16), Tensor.ofBytes(16)))
        .op("p", "Prod", OpCategory.FORWARD, List.of("n:1", "k"), Tensor.ofBytes(16))
        .op("u", "RandomUniform", OpCategory.FORWARD, List.of("k"), Tensor.ofBytes(64))
        .op("v", "Mul", OpCategory.FORWARD, List.of("u", "k"), Tensor.ofBytes(64))
        .build();
    assertThat(BfcReplay.heldAtRun(g))
        .containsExactly(false, false, false, true, true, false, false);
  }
}
