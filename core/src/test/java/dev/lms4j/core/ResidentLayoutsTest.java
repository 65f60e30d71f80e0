package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.ResidentLayouts;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The order init creates variables in, against the BFC allocator's growing regions. */
class ResidentLayoutsTest {
  private static final long MIB = 1 << 20;
  private static final long KIB = 1 << 10;

  /**
   * A 40 MiB table created first, a 512 KiB weight and a 512 KiB activation: the table's region
   * grows to 64 MiB (or all of a smaller limit) and it keeps the whole chunk, so the weight, the
   * feed and the step need a region beyond it: 66 MiB at the least. Created last, the table finds
   * the weight's 2 MiB region made and takes a region cut to what is left: 42 MiB.
   */
  private static DataflowGraph table() {
    return DataflowGraph.builder()
        .op("table", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(40 * MIB))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(512 * KIB))
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(64 * KIB))
        .op("lookup", "GatherV2", OpCategory.FORWARD, List.of("table", "x"),
            Tensor.ofBytes(512 * KIB))
        .op("a", "MatMul", OpCategory.FORWARD, List.of("lookup", "w"), Tensor.ofBytes(64 * KIB))
        .build();
  }

  @Test
  void theLargestVariableCreatedLastGetsARegionCutToWhatIsLeft() {
    DataflowGraph g = table();
    int[] order = Levels.of(g).schedule();
    int tableId = g.op("table").orElseThrow().id();
    assertThat(BfcReplay.smallestMib(g, order, 1024)).isEqualTo(66);
    BfcReplay.Layout last = new BfcReplay.Layout(new int[] {tableId}, 0);
    assertThat(BfcReplay.smallestMib(g, order, 1024, last)).isEqualTo(42);
    // a 2 MiB primer finds too little free in the first region and grows a 4 MiB one, held whole
    // while it lives: the table's region is cut 4 MiB further down
    assertThat(BfcReplay.smallestMib(g, order, 1024,
        new BfcReplay.Layout(new int[] {tableId}, 2 * MIB))).isEqualTo(46);
    assertThat(BfcReplay.replay(g, order, 45 * MIB,
        new BfcReplay.Layout(new int[] {tableId}, 2 * MIB)).failedOp()).isEqualTo("table");

    ResidentLayouts.Choice best = ResidentLayouts.best(g, order, 50 * MIB, 1024);
    assertThat(best.layout()).isEqualTo(last);
    assertThat(best.needBytes()).isEqualTo(42 * MIB);
  }

  /**
   * Where the graph's order fits, it is kept; else the layout with the most room beside the
   * table: at 50 MiB an 8 MiB primer just before it (regions of 2 and 8 MiB, 40 left; made first
   * it leaves 8), a 16 MiB one no longer fits.
   */
  @Test
  void theFittingLayoutKeepsTheGraphsOrderOrTakesTheLargestPrimerThatFits() {
    DataflowGraph g = table();
    int[] order = Levels.of(g).schedule();
    assertThat(ResidentLayouts.fitting(g, order, 70 * MIB).isGraphOrder()).isTrue();
    BfcReplay.Layout at50 = ResidentLayouts.fitting(g, order, 50 * MIB);
    int tableId = g.op("table").orElseThrow().id();
    assertThat(at50.last()).containsExactly(tableId);
    assertThat(at50.primerBytes()).isEqualTo(8 * MIB);
    assertThat(BfcReplay.replay(g, order, 50 * MIB,
        new BfcReplay.Layout(new int[] {tableId}, 16 * MIB)).fits()).isFalse();
    assertThat(ResidentLayouts.fitting(g, order, 41 * MIB)).isNull();
  }

  /**
   * A primer made first sets the region after the first: grappler's constant folding grows a
   * 2 MiB region before it (measured on the zoo LeNet, 2026-12-07), then the primer's 8 MiB,
   * which the weight, the feed and the step share with the 2 MiB one, and the table's region is
   * what is left: 50 MiB at the least (48 before the folding's region was modelled). An 8 MiB
   * primer just before the table leaves the 2 MiB region and its own (10 MiB) too.
   */
  @Test
  void aPrimerMadeFirstSetsTheFirstRegion() {
    DataflowGraph g = table();
    int[] order = Levels.of(g).schedule();
    int tableId = g.op("table").orElseThrow().id();
    BfcReplay.Layout first = new BfcReplay.Layout(new int[] {tableId}, 8 * MIB, true);
    assertThat(BfcReplay.smallestMib(g, order, 1024, first)).isEqualTo(50);
    assertThat(BfcReplay.replay(g, order, 50 * MIB, first).roomBytes()).isEqualTo(10 * MIB);
    assertThat(BfcReplay.replay(g, order, 50 * MIB,
        new BfcReplay.Layout(new int[] {tableId}, 8 * MIB)).roomBytes()).isEqualTo(10 * MIB);
    assertThat(ResidentLayouts.candidates(g, 50 * MIB)).contains(first);
  }

  /**
   * The constants held outside the step come before a primer made first: grappler's folding
   * builds them before init's first op. As on corpus embedding-resource (measured 2026-12-07,
   * {@code LMS4J_BFC_LOG}): a 1 KiB and a 1 MiB held fill take the first 2 MiB region whole (the
   * free chunk left is less than twice the 1 MiB), a 2 KiB one grows a 4 MiB region, the 8 MiB
   * primer its own, and the 48.8 MiB table's region needs 62.8 MiB in all: TensorFlow ran out of
   * memory at 61 MiB and trained at 63. With the primer before the held fills the replay said
   * 59.
   */
  @Test
  void theConstantsHeldOutsideTheStepComeBeforeAPrimerMadeFirst() {
    DataflowGraph g = DataflowGraph.builder()
        .op("b_init", BfcReplay.HELD, OpCategory.FORWARD, List.of(), Tensor.persistent(KIB))
        .op("m_init", BfcReplay.HELD, OpCategory.FORWARD, List.of(), Tensor.persistent(MIB))
        .op("m2_init", BfcReplay.HELD, OpCategory.FORWARD, List.of(),
            Tensor.persistent(2 * KIB))
        .op("table", "VarHandleOp", OpCategory.FORWARD, List.of(),
            Tensor.persistent(51_200_000))
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(64 * KIB))
        .op("lookup", "GatherV2", OpCategory.FORWARD, List.of("table", "x"),
            Tensor.ofBytes(512 * KIB))
        .build();
    int[] order = Levels.of(g).schedule();
    int tableId = g.op("table").orElseThrow().id();
    BfcReplay.Layout first = new BfcReplay.Layout(new int[] {tableId}, 8 * MIB, true);
    assertThat(BfcReplay.smallestMib(g, order, 1024, first)).isEqualTo(63);
    BfcReplay.Result at61 = BfcReplay.replay(g, order, 61 * MIB, first);
    assertThat(at61.fits()).isFalse();
    assertThat(at61.failedOp()).isEqualTo("table");
  }

  /** Small variables (under a tenth of the limit) are never moved: one candidate, the order. */
  @Test
  void withoutALargeVariableTheGraphsOrderIsTheOnlyCandidate() {
    DataflowGraph g = table();
    assertThat(ResidentLayouts.candidates(g, 1024 * MIB))
        .containsExactly(BfcReplay.Layout.GRAPH_ORDER);
    assertThat(ResidentLayouts.candidates(g, 100 * MIB)).hasSizeGreaterThan(1)
        .allSatisfy(l -> assertThat(l.last().length).isLessThanOrEqualTo(1));
  }
}
