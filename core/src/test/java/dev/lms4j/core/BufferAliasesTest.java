package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.BufferAliases;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanApplier;
import dev.lms4j.core.plan.PlanSimulator;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TflmsSwapPlanner;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Outputs that share an input's buffer (Identity, Reshape, identity transposes, ...). */
class BufferAliasesTest {
  private static final long KB = 1024;

  /**
   * x (feed, 1 KB) -> a (Relu, 8 KB) -> r (Reshape of a) -> b (Relu, 4 KB) -> c (Relu, 4 KB).
   * r allocates nothing and keeps a's buffer alive until b, its reader, is done: while b runs,
   * x + a + b = 13 KB. Counting r as a buffer of its own would give 17 KB while r runs.
   */
  @Test
  void aReshapeSharesItsInputsBufferUntilItsLastReader() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KB))
        .op("r", "Reshape", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(8 * KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("r"), Tensor.ofBytes(4 * KB))
        .op("c", "Relu", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(4 * KB))
        .build();
    MemoryProfile p = MemorySimulator.simulate(g, Levels.of(g).schedule());
    assertThat(p.timeline()).containsExactly(KB, 9 * KB, 9 * KB, 13 * KB, 9 * KB);
    assertThat(p.peakBytes()).isEqualTo(13 * KB);
    // the floor: b reads a's buffer (through r) and writes 4 KB; r's working set is a alone
    assertThat(LowerBound.of(g)).isEqualTo(13 * KB);
    assertThat(LowerBound.largestOpName(g)).isEqualTo("b");
    assertThat(BufferAliases.owners(g)[g.opOrThrow("r").id()][0])
        .isEqualTo(new TensorId(g.opOrThrow("a").id(), 0));
  }

  @Test
  void chainsOfAliasesShareOneBuffer() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KB))
        .op("i", "Identity", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(8 * KB))
        .op("e", "ExpandDims", OpCategory.FORWARD, List.of("i"), Tensor.ofBytes(8 * KB))
        .op("s", "StopGradient", OpCategory.FORWARD, List.of("e"), Tensor.ofBytes(8 * KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("s"), Tensor.ofBytes(4 * KB))
        .build();
    TensorId a = new TensorId(g.opOrThrow("a").id(), 0);
    TensorId[][] owner = BufferAliases.owners(g);
    for (String alias : List.of("i", "e", "s")) {
      assertThat(owner[g.opOrThrow(alias).id()][0]).as(alias).isEqualTo(a);
    }
    assertThat(MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes())
        .isEqualTo(13 * KB);
  }

  @Test
  void aTransposeIsAnAliasOnlyWhenItsShapesProveTheIdentityPermutation() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), f32(200, 64))
        .op("y", "Placeholder", OpCategory.FORWARD, List.of(), f32(64, 64))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), f32(200, 64))
        .op("b", "Relu", OpCategory.FORWARD, List.of("y"), f32(64, 64))
        .op("same", "Transpose", OpCategory.FORWARD, List.of("a"), f32(200, 64))
        .op("swapped", "Transpose", OpCategory.FORWARD, List.of("a"), f32(64, 200))
        .op("square", "Transpose", OpCategory.FORWARD, List.of("b"), f32(64, 64))
        .build();
    assertThat(BufferAliases.source(g, g.opOrThrow("same"), 0)).isNotNull();
    // a real transpose: the shapes differ
    assertThat(BufferAliases.source(g, g.opOrThrow("swapped"), 0)).isNull();
    // [64, 64] -> [64, 64] may be a real transpose: repeated dimensions prove nothing
    assertThat(BufferAliases.source(g, g.opOrThrow("square"), 0)).isNull();
  }

  @Test
  void copiesAcrossDevicesInsertedOpsAndResizedOutputsAreNotAliases() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KB))
        .op("host", "Identity", OpCategory.FORWARD, "/cpu:0", List.of("a"),
            List.of(Tensor.ofBytes(8 * KB)))
        .op("lms4j/swapin", "Identity", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(8 * KB))
        .op("smaller", "Reshape", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(4 * KB))
        .op("n", "IdentityN", OpCategory.FORWARD, "", List.of("x", "a"),
            List.of(Tensor.ofBytes(KB), Tensor.ofBytes(8 * KB)))
        .build();
    assertThat(BufferAliases.source(g, g.opOrThrow("host"), 0)).isNull();
    assertThat(BufferAliases.source(g, g.opOrThrow("lms4j/swapin"), 0)).isNull();
    assertThat(BufferAliases.source(g, g.opOrThrow("smaller"), 0)).isNull();
    assertThat(BufferAliases.source(g, g.opOrThrow("n"), 1))
        .isEqualTo(new TensorId(g.opOrThrow("a").id(), 0));
  }

  /**
   * The fast plan simulator agrees with applying a plan and simulating it on a graph whose
   * forward pass reshapes every other activation, for swap plans that swap aliases too.
   */
  @Test
  void planSimulatorAgreesOnGraphsWithAliases() {
    DataflowGraph aliased = chainWithReshapes(12, "Reshape");
    DataflowGraph copied = chainWithReshapes(12, "Relu");
    PlanSimulator fast = new PlanSimulator(aliased);
    int checked = 0;
    int swappedAliases = 0;
    for (int th : new int[] {0, 1, 3, 7}) {
      for (int ahead : new int[] {1, 2, 5}) {
        for (int sync = 0; sync <= 3; sync++) {
          SwapPlan p = TflmsSwapPlanner.plan(aliased, SwapParams.builder().swapoutThreshold(th)
              .swapinAhead(ahead).swapinGroupby(0).syncMode(sync).build());
          DataflowGraph r = PlanApplier.apply(aliased, p);
          long slow = MemorySimulator.simulate(r, Levels.of(r).schedule()).peakBytes();
          assertThat(fast.peak(p)).as("th %d ahead %d sync %d", th, ahead, sync)
              .isEqualTo(slow);
          swappedAliases += (int) p.swapOuts().stream()
              .filter(so -> aliased.opOrThrow(so.producer()).type().equals("Reshape")).count();
          checked++;
        }
      }
    }
    assertThat(checked).isEqualTo(48);
    assertThat(swappedAliases).isPositive();
    long aliasedPeak = MemorySimulator.simulate(aliased, Levels.of(aliased).schedule())
        .peakBytes();
    assertThat(fast.peak(SwapPlan.empty(SwapParams.defaults()))).isEqualTo(aliasedPeak);
    assertThat(aliasedPeak).isLessThan(
        MemorySimulator.simulate(copied, Levels.of(copied).schedule()).peakBytes());
  }

  private static DataflowGraph chainWithReshapes(int layers, String evenType) {
    DataflowGraphBuilder b = DataflowGraph.builder();
    long act = 1 << 20;
    Tensor t = new Tensor("float32", new long[] {act / 64, 16}, act, false);
    b.op("x", "Placeholder", OpCategory.FORWARD, List.of(), t);
    String prev = "x";
    for (int i = 1; i <= layers; i++) {
      String type = i % 2 == 0 ? evenType : "Relu";
      b.op("f" + i, type, OpCategory.FORWARD, List.of(prev), t);
      prev = "f" + i;
    }
    b.op("loss", "Mean", OpCategory.FORWARD, List.of(prev), Tensor.ofBytes(4));
    b.op("gradients/g" + (layers + 1), "Fill", OpCategory.BACKWARD, List.of("loss"), t);
    String grad = "gradients/g" + (layers + 1);
    List<String> ends = new ArrayList<>();
    for (int i = layers; i >= 1; i--) {
      String input = i == 1 ? "x" : "f" + (i - 1);
      b.op("gradients/g" + i, "ReluGrad", OpCategory.BACKWARD, List.of(grad, input), t);
      grad = "gradients/g" + i;
    }
    ends.add("^" + grad);
    b.op("train_op", "NoOp", OpCategory.OPTIMIZER, "", ends, List.of());
    return b.build();
  }

  /**
   * The gradient of a same-shape Add sums the incoming gradient over no axis: that Sum hands
   * its input's buffer on (TensorFlow's reduction kernel, when nothing is reduced), where a Sum
   * over a real axis allocates its smaller output. g (64 KB) -> s (Sum over nothing, 64 KB) and
   * r (Sum over rows, 256 B) -> both read by u: s shares g's buffer.
   */
  @Test
  void aReductionOverNothingSharesItsInputsBuffer() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), f32(64, 64))
        .op("grad", "Relu", OpCategory.BACKWARD, List.of("x"), f32(64, 256))
        .op("s", "Sum", OpCategory.BACKWARD, List.of("grad"), f32(64, 256))
        .op("r", "Sum", OpCategory.BACKWARD, List.of("grad"), f32(1, 256))
        .op("u", "AddN", OpCategory.BACKWARD, List.of("s", "s"), f32(64, 256))
        .op("v", "Relu", OpCategory.BACKWARD, List.of("r"), f32(1, 256))
        .build();
    TensorId[][] owner = BufferAliases.owners(g);
    TensorId grad = new TensorId(g.opOrThrow("grad").id(), 0);
    assertThat(owner[g.opOrThrow("s").id()][0]).isEqualTo(grad);
    assertThat(owner[g.opOrThrow("r").id()][0])
        .isEqualTo(new TensorId(g.opOrThrow("r").id(), 0));
    // x 16 KB; grad 64 KB; s nothing; r 1 KB; u 64 KB while grad (through s) is alive
    assertThat(MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes())
        .isEqualTo((16 + 64 + 1 + 64) * KB);
  }

  private static Tensor f32(long rows, long cols) {
    return new Tensor("float32", new long[] {rows, cols}, rows * cols * 4, false);
  }
}
