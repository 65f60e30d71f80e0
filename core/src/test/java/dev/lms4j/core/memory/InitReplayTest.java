package dev.lms4j.core.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The init run replayed alone ({@link BfcReplay#replayInit}): a variable holds memory from its
 * assignment on, taking its value's buffer over where nobody reads the value after, and the
 * initializers' temporaries come and go. The figures follow from the allocator's rules: the
 * first region is 2 MiB (the constants' 8-byte chunks take 256 bytes each of it), each later one
 * twice the one before or as large as the request needs, never more than what is left under the
 * limit, and a free chunk under twice the request is handed out whole.
 */
class InitReplayTest {
  private static final long MIB = 1 << 20;
  private static final long KIB = 1 << 10;
  private static final F F = new F();

  /** Shorthand for the ops of an init graph. */
  private static final class F {
    DataflowGraphBuilder constant(DataflowGraphBuilder b, String name) {
      return b.op(name, "Const", OpCategory.FORWARD, List.of(), Tensor.ofBytes(8));
    }

    DataflowGraphBuilder variable(DataflowGraphBuilder b, String name, long bytes) {
      return b.op(name, "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(bytes));
    }

    DataflowGraphBuilder assign(DataflowGraphBuilder b, String var, String value, long bytes) {
      return b.op(var + "_assign", "Assign", OpCategory.FORWARD, List.of(var, value),
          Tensor.persistent(bytes));
    }
  }

  private static long need(DataflowGraph g) {
    return need(g, Set.of());
  }

  private static long need(DataflowGraph g, Set<String> held) {
    return BfcReplay.smallestInitMib(g, Levels.of(g).schedule(), 4096, held);
  }

  /**
   * A 40 MiB draw scaled in place and assigned: the variable takes the draw's buffer over, so
   * init needs the constants' 2 MiB region and one region of 40 MiB. Where a second variable
   * (a moving average's shadow) is assigned the same value, the first assignment must copy it:
   * the draw keeps a 64 MiB region whole (under 2 x 40) and the copy needs 40 more, 106 MiB.
   */
  @Test
  void aVariableTakesItsValuesBufferWhereNobodyReadsItAfter() {
    DataflowGraphBuilder b = DataflowGraph.builder().inPlaceReuse(true);
    F.constant(b, "shape");
    F.constant(b, "scale");
    F.variable(b, "w", 40 * MIB);
    b.op("draw", "RandomUniform", OpCategory.FORWARD, List.of("shape"), Tensor.ofBytes(40 * MIB));
    b.op("scaled", "Mul", OpCategory.FORWARD, List.of("draw", "scale"),
        Tensor.ofBytes(40 * MIB));
    F.assign(b, "w", "scaled", 40 * MIB);
    DataflowGraph one = b.build();
    assertThat(need(one)).isEqualTo(42);

    DataflowGraphBuilder b2 = one.toBuilder();
    F.variable(b2, "w_shadow", 40 * MIB);
    F.assign(b2, "w_shadow", "scaled", 40 * MIB);
    DataflowGraph two = b2.build();
    assertThat(need(two)).isEqualTo(106);
  }

  /**
   * A Fill of constants is folded by grappler into a constant the init run's executor holds for
   * the session (the caller names it: {@code InitHeldConstants.folded}): allocated before init
   * runs, never freed, and the variable assigned from it gets a copy (2 + 8 + 8 MiB). The same
   * value drawn at run time is taken over (2 + 8).
   */
  @Test
  void aFoldedFillIsHeldAndCopiedWhereADrawIsTakenOver() {
    DataflowGraphBuilder b = DataflowGraph.builder().inPlaceReuse(true);
    F.constant(b, "shape");
    F.constant(b, "zero");
    F.variable(b, "slot", 8 * MIB);
    b.op("zeros", "Fill", OpCategory.FORWARD, List.of("shape", "zero"), Tensor.ofBytes(8 * MIB));
    F.assign(b, "slot", "zeros", 8 * MIB);
    assertThat(need(b.build(), Set.of("zeros"))).isEqualTo(18);

    DataflowGraphBuilder d = DataflowGraph.builder().inPlaceReuse(true);
    F.constant(d, "shape");
    F.variable(d, "slot", 8 * MIB);
    d.op("draw", "RandomUniform", OpCategory.FORWARD, List.of("shape"), Tensor.ofBytes(8 * MIB));
    F.assign(d, "slot", "draw", 8 * MIB);
    assertThat(need(d.build())).isEqualTo(10);
  }

  /**
   * corpus init-heavy's initializer: {@code 0.03 * clip(normal) + 0.01 * (uniform - 0.5)}. The
   * clip, the scalings and the sum run in place (TensorFlow's ClipOp forwards its input too), so
   * two 40 MiB temporaries are alive at once, never three: a 64 MiB region held whole by the
   * first and a region cut to 40 MiB for the second, 106 MiB; the variable takes the sum's
   * buffer over.
   */
  @Test
  void twoDrawsAliveAtOnceAndNothingMore() {
    DataflowGraphBuilder b = DataflowGraph.builder().inPlaceReuse(true);
    for (String c : new String[] {"shape", "lo", "hi", "a", "half", "c"}) {
      F.constant(b, c);
    }
    F.variable(b, "table", 40 * MIB);
    Tensor t = Tensor.ofBytes(40 * MIB);
    b.op("normal", "RandomStandardNormal", OpCategory.FORWARD, List.of("shape"), t);
    b.op("uniform", "RandomUniform", OpCategory.FORWARD, List.of("shape"), t);
    b.op("clip", "ClipByValue", OpCategory.FORWARD, List.of("normal", "lo", "hi"), t);
    b.op("scaled", "Mul", OpCategory.FORWARD, List.of("clip", "a"), t);
    b.op("centred", "Sub", OpCategory.FORWARD, List.of("uniform", "half"), t);
    b.op("scaled2", "Mul", OpCategory.FORWARD, List.of("centred", "c"), t);
    b.op("sum", "Add", OpCategory.FORWARD, List.of("scaled", "scaled2"), t);
    F.assign(b, "table", "sum", 40 * MIB);
    DataflowGraph g = b.build();
    assertThat(need(g)).isEqualTo(106);
    BfcReplay.Result r = BfcReplay.replayInit(g, Levels.of(g).schedule(), 4096 * MIB, Set.of());
    // unbounded, each draw holds a 64 MiB region whole (the second region is grown at the size
    // the first one reached, 64 MiB) beside the six constants' 256-byte chunks; a third
    // temporary would add at least 40 MiB
    assertThat(r.peakInUse()).isEqualTo(128 * MIB + 6 * 256);
  }

  /**
   * Where the executor's order draws a 40 MiB value first, a 1 MiB draw then takes the first
   * region's free chunk whole (under twice its size) and a 2 KiB draw needs a region of its own
   * beside the 64 MiB one; drawn smallest first, the 2 KiB and the 1 MiB share the first region
   * and the 40 MiB one gets what is left: 42 MiB.
   */
  @Test
  void theBestOrderLetsSmallDrawsShareTheFirstRegion() {
    DataflowGraphBuilder b = DataflowGraph.builder().inPlaceReuse(true);
    String[][] vars = {{"big", String.valueOf(40 * MIB)}, {"mid", String.valueOf(MIB)},
        {"tiny", String.valueOf(2 * KIB)}};
    for (String[] v : vars) {
      long bytes = Long.parseLong(v[1]);
      F.constant(b, v[0] + "_shape");
      F.variable(b, v[0], bytes);
      b.op(v[0] + "_draw", "RandomUniform", OpCategory.FORWARD, List.of(v[0] + "_shape"),
          Tensor.ofBytes(bytes));
      F.assign(b, v[0], v[0] + "_draw", bytes);
    }
    BfcReplay.InitNeed need = BfcReplay.initNeed(b.build(), 4096, Set.of());
    assertThat(need.bestMib()).isEqualTo(42);
    assertThat(need.graphOrderMib()).isGreaterThan(need.bestMib() + 20);
  }
}
