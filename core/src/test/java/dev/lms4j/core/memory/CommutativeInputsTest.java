package dev.lms4j.core.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Which input a commutative element-wise op takes over in place. Grappler sorts a commutative
 * op's inputs by name before the step runs ({@code CanonicalizeNode}), so the kernel tries them
 * in that order. Traced on the quick suite's ResNet-50: {@code Add(stage1/block2/bn3/norm,
 * stage1/block1/out)}, as the graph writes it, ran as {@code Add(stage1/block1/out,
 * stage1/block2/bn3/norm)} (every block's residual add of the trace had its inputs in name order),
 * took the shortcut's buffer, whose other readers had run, and freed the batch norm's.
 */
class CommutativeInputsTest {
  private static final long KIB = 1 << 10;

  /**
   * x (feed); "z/left" and "a/right" (8 KiB each) made from it, each read by add only;
   * add = {@code type}(z/left, a/right), as the graph writes it; its mean ends the step.
   */
  private static DataflowGraph pair(String type) {
    return DataflowGraph.builder().inPlaceReuse(true)
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KIB))
        .op("z/left", "MatMul", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KIB))
        .op("a/right", "MatMul", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KIB))
        .op("add", type, OpCategory.FORWARD, List.of("z/left", "a/right"),
            Tensor.ofBytes(8 * KIB))
        .op("mean", "Mean", OpCategory.FORWARD, List.of("add"), Tensor.ofBytes(4))
        .build();
  }

  @Test
  void aCommutativeOpTriesItsInputsInNameOrder() {
    DataflowGraph g = pair("AddV2");
    Op add = g.opOrThrow("add");
    assertThat(BufferAliases.inPlaceCandidates(g, add, 0)).containsExactly(1, 0);
    assertThat(BufferAliases.inPlaceCandidates(add, 0)).containsExactly(0, 1);
    DataflowGraph sub = pair("Sub");
    assertThat(BufferAliases.inPlaceCandidates(sub, sub.opOrThrow("add"), 0))
        .as("Sub is not commutative: grappler leaves its inputs where they are")
        .containsExactly(0, 1);
  }

  @Test
  void theInputFirstInNameOrderIsTakenAndTheOtherFreed() {
    DataflowGraph g = pair("AddV2");
    // both inputs are read by add alone: the kernel takes the first it tries
    assertThat(BufferAliases.owners(g)[g.opOrThrow("add").id()][0].op())
        .isEqualTo(g.opOrThrow("a/right").id());
    assertThat(freedWhenAddIsDone(g)).containsExactly("z/left");
    DataflowGraph mul = pair("Mul");
    assertThat(freedWhenAddIsDone(mul)).containsExactly("z/left");
    // not commutative: input 0 as written
    DataflowGraph sub = pair("Sub");
    assertThat(freedWhenAddIsDone(sub)).containsExactly("a/right");
  }

  /**
   * As a ResNet's residual add: "z/bn" is read by add alone, "a/short" by "reader" too, which
   * runs first. Add tries a/short first (name order) and, its other reader done, takes it; the
   * batch norm's buffer is freed. Taking z/bn ahead of time (its only reader) would free
   * a/short's instead, a chunk elsewhere.
   */
  @Test
  void theReplayTakesTheFirstInputWhoseOtherReadersHaveRun() {
    DataflowGraph g = residual("z/bn", "a/short");
    // the planners' simulator takes the only reader's buffer ahead of time, whatever the order
    assertThat(BufferAliases.owners(g)[g.opOrThrow("add").id()][0].op())
        .isEqualTo(g.opOrThrow("z/bn").id());
    assertThat(freedWhenAddIsDone(g)).containsExactly("z/bn");
    // named the other way round, the batch norm's input is tried first and taken
    assertThat(freedWhenAddIsDone(residual("a/bn", "z/short"))).containsExactly("z/short");
  }

  /**
   * x (feed); {@code bn} and {@code shortcut} (8 KiB each) made from it; the shortcut also read
   * by "reader", which add waits for; add = AddV2(bn, shortcut); a mean of add and reader.
   */
  private static DataflowGraph residual(String bn, String shortcut) {
    return DataflowGraph.builder().inPlaceReuse(true)
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KIB))
        .op(shortcut, "MatMul", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KIB))
        .op(bn, "MatMul", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KIB))
        .op("reader", "MatMul", OpCategory.FORWARD, List.of(shortcut), Tensor.ofBytes(KIB))
        .op("add", "AddV2", OpCategory.FORWARD, List.of(bn, shortcut, "^reader"),
            Tensor.ofBytes(8 * KIB))
        .op("mean", "Mean", OpCategory.FORWARD, List.of("add", "reader"), Tensor.ofBytes(4))
        .build();
  }

  /** The buffers freed when add is done, replayed in op order as {@link BfcReplay} runs a step. */
  private static List<String> freedWhenAddIsDone(DataflowGraph g) {
    BufferRefs refs = BufferRefs.of(g, true);
    List<String> freed = new ArrayList<>();
    for (Op op : g.ops()) {
      refs.forward(op);
      List<String> now = new ArrayList<>();
      refs.release(op, (o, i) -> now.add(g.op(o).name()));
      if (op.name().equals("add")) {
        assertThat(refs.allocates(op.id(), 0)).as("add takes a buffer over").isFalse();
        freed.addAll(now);
      }
    }
    return freed;
  }
}
