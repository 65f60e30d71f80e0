package dev.lms4j.core;

import static dev.lms4j.core.graph.Tensor.float32;
import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.ScratchEstimates;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The BFC allocator's regions and unsplit chunks, which the sum of live bytes misses. */
class BfcReplayTest {
  private static final long MIB = 1 << 20;
  private static final long KIB = 1 << 10;

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
    // per op, the chunks in use while it runs: the variable's chunk, then the output's region
    // too; from the op that fails on, -1
    assertThat(order).containsExactly(0, 1);
    assertThat(BfcReplay.inUseWhileRunning(g, order, 94 * MIB, BfcReplay.Layout.GRAPH_ORDER))
        .containsExactly(64 * MIB, 94 * MIB);
    assertThat(BfcReplay.inUseWhileRunning(g, order, 93 * MIB, BfcReplay.Layout.GRAPH_ORDER))
        .containsExactly(64 * MIB, -1L);
    assertThat(BfcReplay.smallestMib(g, order, 80)).isEqualTo(-1);
  }

  /**
   * A training step runs again and again in the regions its first run grew, and the second run
   * can need more: its best fit finds the chunks the first run left, where the first run got
   * fresh regions sized for each request. A chain x -> 9 MiB -> 7 MiB -> 11 MiB under 27 MiB:
   * the first step gets a 2 MiB region (x), 16 (the 9 MiB tensor, whole), then the 9 MiB left
   * (the 7 MiB tensor, whole), and the 11 MiB tensor reuses the freed 16. The second step puts
   * the 9 MiB tensor into the 9 MiB chunk (the best fit), splits the 16 for the 7 MiB one, and
   * finds no 11 MiB chunk: out of memory, where the first step fitted. Under 25 MiB the third
   * region is 7 MiB and both steps fit; the smallest limit with two steps is 29 MiB. (Measured
   * on TensorFlow: the corpus encoder's auto plan for 70 MiB ran its first step under 71 MiB and
   * ran out of memory in the second.)
   */
  @Test
  void theSecondStepRunsInTheRegionsTheFirstGrew() {
    DataflowGraph g = matMulChain(256 * KIB, 9 * MIB, 7 * MIB, 11 * MIB);
    int[] order = Levels.of(g).schedule();
    assertThat(BfcReplay.STEPS).isEqualTo(2);
    BfcReplay.Layout asGiven = BfcReplay.Layout.GRAPH_ORDER;
    BfcReplay.Result one = BfcReplay.replay(g, order, 27 * MIB, asGiven, 1);
    assertThat(one.fits()).isTrue();
    assertThat(one.regionBytes()).isEqualTo(27 * MIB);
    BfcReplay.Result two = BfcReplay.replay(g, order, 27 * MIB);
    assertThat(two.fits()).isFalse();
    assertThat(two.failedOp()).isEqualTo("c");
    assertThat(two.failedBytes()).isEqualTo(11 * MIB);
    // per op, what the second step holds (the one a trace of the second step is compared to):
    // a in the 9 MiB chunk, then b in 7 of the 16 beside it, and c failed
    long[] during = BfcReplay.inUseWhileRunning(g, order, 27 * MIB, asGiven);
    assertThat(order).containsExactly(0, 1, 2, 3);
    assertThat(during[1]).isEqualTo(9 * MIB + 256 * KIB);
    assertThat(during[2]).isEqualTo(16 * MIB + 256 * KIB);
    assertThat(during[3]).isEqualTo(-1);
    assertThat(BfcReplay.replay(g, order, 25 * MIB).fits()).isTrue();
    assertThat(BfcReplay.smallestMib(g, order, 64, asGiven, 1)).isEqualTo(25);
    assertThat(BfcReplay.smallestMib(g, order, 64)).isEqualTo(29);
  }

  /**
   * Freed chunks coalesce and are reused: a chain of equal activations needs two of them (the
   * ops are matmuls, which never write into their input).
   */
  @Test
  void freedChunksAreReused() {
    DataflowGraph g = matMulChain(1 * MIB, 8 * MIB, 8 * MIB, 8 * MIB, 8 * MIB);
    int[] order = Levels.of(g).schedule();
    BfcReplay.Result r = BfcReplay.replay(g, order, 1024 * MIB);
    assertThat(r.fits()).isTrue();
    // regions: 2 MiB (x takes half: 2 MiB is twice its request, so the chunk is split), 8 MiB
    // (a: the region size doubles until a fits), 8 MiB (b); c and d reuse a's and b's chunks
    assertThat(r.regionBytes()).isEqualTo(18 * MIB);
    assertThat(r.peakInUse()).isEqualTo(17 * MIB);
  }

  /**
   * A running gradient sum, {@code acc_i = AddV2(acc_(i-1), g_i)} over 4 MiB partials, as the
   * rewrite of an unrolled RNN's {@code AddN} makes it: TensorFlow's {@code AddV2} writes into the
   * old sum's buffer (its last reader), so a step holds the sum and one partial, 8 MiB. The sum of
   * live bytes (the simulator, which takes no reuse) counts a third 4 MiB for each new sum.
   * Regions: 2 MiB (x), 4 MiB (g0 whole), then what is left: under 10 MiB a 4 MiB region holds
   * g1, g2 and g3 in turn; 9 MiB leaves 3 MiB, too small. Without reuse each AddV2 would need a
   * third 4 MiB chunk while g and the sum are alive: 14 MiB.
   */
  @Test
  void aRunningSumReusesItsBufferInPlace() {
    DataflowGraph g = runningSum(false);
    int[] order = Levels.of(g).schedule();
    assertThat(MemorySimulator.simulate(g, order).peakBytes()).isEqualTo(12 * MIB + 64 * KIB);
    BfcReplay.Result r = BfcReplay.replay(g, order, 1024 * MIB);
    assertThat(r.peakInUse()).isEqualTo(8 * MIB + 64 * KIB);
    assertThat(BfcReplay.smallestMib(g, order, 1024)).isEqualTo(10);
    assertThat(BfcReplay.replay(g, order, 9 * MIB).failedOp()).isEqualTo("g1");
  }

  /**
   * Reuse needs the op to be the buffer's last reader: when every partial and the first two sums
   * are read again at the end ({@code keep}), no {@code AddV2} may write into an input, each new sum
   * is a chunk of its own, and the replay needs what the live bytes say plus the regions.
   */
  @Test
  void aBufferStillReadLaterIsNotReused() {
    DataflowGraph g = runningSum(true);
    int[] order = Levels.of(g).schedule();
    BfcReplay.Result r = BfcReplay.replay(g, order, 1024 * MIB);
    assertThat(r.peakInUse()).isEqualTo(MemorySimulator.simulate(g, order).peakBytes());
    assertThat(BfcReplay.smallestMib(g, order, 1024)).isGreaterThan(10);
  }

  /** An op reading the same buffer twice ({@code Mul(a, a)}) never writes into it. */
  @Test
  void aBufferReadTwiceByTheOpIsNotReused() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(64 * KIB))
        .op("a", "MatMul", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(4 * MIB))
        .op("sq", "Mul", OpCategory.FORWARD, List.of("a", "a"), Tensor.ofBytes(4 * MIB))
        .op("r", "Relu", OpCategory.FORWARD, List.of("sq"), Tensor.ofBytes(4 * MIB))
        .build();
    int[] order = Levels.of(g).schedule();
    // a and sq are both alive while sq runs (8 MiB); r then writes into sq's buffer
    assertThat(BfcReplay.replay(g, order, 1024 * MIB).peakInUse()).isEqualTo(8 * MIB + 64 * KIB);
  }

  /**
   * A constant TensorFlow holds outside the step ({@link BfcReplay#HELD}, persistent): resident
   * for the simulator (x, a and the held 1 MiB: 3 MiB) and the replay, which allocates it first:
   * the 2 MiB region holds it and x, a needs a region of its own (4 MiB, the next size).
   */
  @Test
  void constantsHeldOutsideTheStepAreResidentAndAllocatedFirst() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(1 * MIB))
        .op("a", "MatMul", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(1 * MIB))
        .op("slot_fill", BfcReplay.HELD, OpCategory.FORWARD, List.of(),
            Tensor.persistent(1 * MIB))
        .build();
    int[] order = Levels.of(g).schedule();
    assertThat(MemorySimulator.simulate(g, order).peakBytes()).isEqualTo(3 * MIB);
    BfcReplay.Result r = BfcReplay.replay(g, order, 1024 * MIB);
    assertThat(r.peakInUse()).isEqualTo(3 * MIB);
    assertThat(r.regionBytes()).isEqualTo(6 * MIB);
    assertThat(BfcReplay.replay(g, order, 3 * MIB).fits()).isTrue();
    assertThat(BfcReplay.replay(g, order, 3 * MIB - 256).failedOp()).isEqualTo("a");
  }

  /**
   * A resource variable init assigned a held constant shares that constant's buffer
   * ({@link DataflowGraph#initShared()}): init allocates nothing for it, and its first update
   * copies it into a chunk of its own, in the first step only. Here a 1 MiB momentum slot and
   * its 1 MiB zero fill: before the step the held fill alone is in use; the update's copy is
   * the first step's last request, and the second step asks for nothing new for it.
   */
  @Test
  void aVariableSharingAHeldConstantGetsItsOwnChunkAtItsFirstUpdate() {
    DataflowGraph g = DataflowGraph.builder()
        .op("slot_fill", BfcReplay.HELD, OpCategory.FORWARD, List.of(),
            Tensor.persistent(1 * MIB))
        .op("slot", "VarHandleOp", OpCategory.FORWARD, List.of(), Tensor.persistent(1 * MIB))
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(4 * KIB))
        .op("g", "MatMul", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(64 * KIB))
        .op("update", "ResourceApplyMomentum", OpCategory.FORWARD, List.of("slot", "g"),
            Tensor.ofBytes(0))
        .initShared(java.util.Set.of("slot"))
        .build();
    int[] order = Levels.of(g).schedule();
    List<String> lines = new java.util.ArrayList<>();
    assertThat(BfcReplay.requests(g, order, 1024 * MIB, BfcReplay.Layout.GRAPH_ORDER,
        lines::add).fits()).isTrue();
    List<String> granted = lines.stream().filter(l -> l.startsWith("A ")).toList();
    assertThat(granted).filteredOn(l -> l.startsWith("A 1048576 ")).extracting(
        l -> l.substring(l.lastIndexOf(' ') + 1)).containsExactly("slot_fill", "update");
    assertThat(granted.indexOf(granted.stream().filter(l -> l.endsWith(" update")).findFirst()
        .orElseThrow())).isGreaterThan(granted.indexOf(granted.stream()
        .filter(l -> l.endsWith(" g")).findFirst().orElseThrow()));
    // without the sharing the slot is a resident like any other, made before the step
    DataflowGraph own = g.toBuilder().initShared(java.util.Set.of()).build();
    List<String> ownLines = new java.util.ArrayList<>();
    BfcReplay.requests(own, order, 1024 * MIB, BfcReplay.Layout.GRAPH_ORDER, ownLines::add);
    assertThat(ownLines).filteredOn(l -> l.startsWith("A 1048576 ")).extracting(
        l -> l.substring(l.lastIndexOf(' ') + 1)).containsExactly("slot_fill", "slot");
  }

  /**
   * oneDNN's batch norm allocates its five per-channel outputs before y
   * ({@link ScratchEstimates#outputAllocationOrder}). The feed x (1 MiB) takes half of the first
   * 2 MiB region; the free half would hold y (1 MiB) exactly, but the per-channel outputs come
   * first and split it, so y needs a region of its own: 3 MiB. With TensorFlow's own kernel, y
   * takes the free half and the small outputs fit in a 4 KiB region beside it.
   */
  @Test
  void oneDnnsBatchNormAllocatesItsPerChannelOutputsBeforeY() {
    List<Tensor> outs = new java.util.ArrayList<>(List.of(Tensor.ofBytes(1 * MIB)));
    for (int i = 0; i < 5; i++) {
      outs.add(Tensor.ofBytes(64)); // 16 channels of float32
    }
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(1 * MIB))
        .op("bn", "FusedBatchNormV3", OpCategory.FORWARD, "", List.of("x"), outs)
        .build();
    int[] order = Levels.of(g).schedule();
    ScratchEstimates.Host oneDnn = new ScratchEstimates.Host(2, 32 * MIB, true);
    ScratchEstimates.Host own = new ScratchEstimates.Host(2, 32 * MIB, false);
    assertThat(ScratchEstimates.outputAllocationOrder(g.opOrThrow("bn"), oneDnn))
        .containsExactly(1, 2, 3, 4, 5, 0);
    assertThat(ScratchEstimates.outputAllocationOrder(g.opOrThrow("bn"), own))
        .containsExactly(0, 1, 2, 3, 4, 5);
    assertThat(ScratchEstimates.outputAllocationOrder(g.opOrThrow("x"), oneDnn))
        .containsExactly(0);
    BfcReplay.Layout graphOrder = BfcReplay.Layout.GRAPH_ORDER;
    assertThat(BfcReplay.replay(g, order, 3 * MIB, graphOrder, oneDnn).fits()).isTrue();
    BfcReplay.Result no = BfcReplay.replay(g, order, 3 * MIB - 256, graphOrder, oneDnn);
    assertThat(no.fits()).isFalse();
    assertThat(no.failedOp()).isEqualTo("bn");
    assertThat(no.failedBytes()).isEqualTo(1 * MIB);
    assertThat(BfcReplay.replay(g, order, 2 * MIB + 4 * KIB, graphOrder, own).fits()).isTrue();
  }

  /**
   * A max-pool gradient copies the pooled output only when it cannot take that buffer over
   * ({@link ScratchEstimates#forwardableInputCopy}): as the pooled output's last reader it
   * allocates just its int64 arg-max indices (512 KiB for 65536 values), else 256 KiB more for
   * the float copy. The live-bytes simulator keeps the copy either way.
   */
  @Test
  void aMaxPoolGradientThatReadsThePooledOutputLastCopiesNothing() {
    for (boolean readLater : new boolean[] {false, true}) {
      var b = DataflowGraph.builder()
          .op("x", "Placeholder", OpCategory.FORWARD, List.of(), float32(16, 32, 32, 16))
          .op("y", "MaxPool", OpCategory.FORWARD, List.of("x"), float32(16, 16, 16, 16))
          .op("dy", "Placeholder", OpCategory.FORWARD, List.of(), float32(16, 16, 16, 16))
          .op("dx", "MaxPoolGradV2", OpCategory.BACKWARD, List.of("x", "y", "dy"),
              float32(16, 32, 32, 16));
      if (readLater) {
        b.op("late", "Relu", OpCategory.BACKWARD, List.of("y", "^dx"), float32(16, 16, 16, 16));
      }
      DataflowGraph g = b.build();
      int[] order = Levels.of(g).schedule();
      long pooled = 16L * 16 * 16 * 16;
      assertThat(g.scratchBytes(g.opOrThrow("dx").id())).isEqualTo(pooled * 12);
      // feeds x (1 MiB) and dy (256 KiB); y (256 KiB) and dx (1 MiB) while dx's scratch is out
      long tensors = MIB + 256 * KIB + 256 * KIB + MIB;
      BfcReplay.Result r = BfcReplay.replay(g, order, 1L << 30);
      assertThat(r.fits()).isTrue();
      assertThat(r.peakInUse()).as("read later: %s", readLater)
          .isEqualTo(tensors + pooled * (readLater ? 12 : 8));
      assertThat(MemorySimulator.simulate(g, order).peakBytes()).isEqualTo(tensors + pooled * 12);
    }
  }

  /**
   * A feed {@code x} of {@code feedBytes}, then matmuls {@code a}, {@code b}, ... each reading
   * the one before (a matmul never writes into its input), of the given sizes.
   */
  private static DataflowGraph matMulChain(long feedBytes, long... bytes) {
    var b = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(feedBytes));
    String before = "x";
    for (int i = 0; i < bytes.length; i++) {
      String name = String.valueOf((char) ('a' + i));
      b.op(name, "MatMul", OpCategory.FORWARD, List.of(before), Tensor.ofBytes(bytes[i]));
      before = name;
    }
    return b.build();
  }

  private static DataflowGraph runningSum(boolean keep) {
    var b = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(64 * KIB));
    String acc = null;
    for (int i = 0; i < 4; i++) {
      // each partial waits for the sum before it, as backprop orders them
      b.op("g" + i, "MatMul", OpCategory.BACKWARD, acc == null ? List.of("x")
          : List.of("x", "^" + acc), Tensor.ofBytes(4 * MIB));
      if (acc == null) {
        acc = "g0";
      } else {
        String sum = "acc" + i;
        b.op(sum, "AddV2", OpCategory.BACKWARD, List.of(acc, "g" + i), Tensor.ofBytes(4 * MIB));
        acc = sum;
      }
    }
    List<String> end = new java.util.ArrayList<>(List.of(acc));
    if (keep) {
      for (int i = 0; i < 4; i++) {
        end.add("g" + i);
      }
      end.add("acc1");
      end.add("acc2");
    }
    b.op("update", "AddN", OpCategory.OPTIMIZER, end, Tensor.ofBytes(0));
    return b.build();
  }
  /**
   * A kernel that asks for its scratch in several chunks gets each placed on its own: a float16
   * product of two 2 MiB variables asks for three 4 MiB float32 copies
   * ({@code ScratchEstimates#estimateChunks}). Regions 2 (x), 4 (w, then y in its other half),
   * 8 (two copies); the third copy needs a region of its own, and under 17 MiB only 3 MiB are
   * left: the request that fails is one 4 MiB copy, not 12 MiB of scratch in one piece.
   */
  @Test
  void scratchAskedForInSeveralChunksIsPlacedChunkByChunk() {
    long[] shape = {1024, 1024};
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "VariableV2", OpCategory.FORWARD, List.of(),
            new Tensor("float16", shape, 2 * MIB, true))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(),
            new Tensor("float16", shape, 2 * MIB, true))
        .op("y", "MatMul", OpCategory.FORWARD, List.of("x", "w"),
            new Tensor("float16", shape, 2 * MIB, false))
        .build();
    int[] order = Levels.of(g).schedule();
    assertThat(g.scratchBytes(g.opOrThrow("y").id())).isEqualTo(12 * MIB);
    BfcReplay.Result no = BfcReplay.replay(g, order, 17 * MIB);
    assertThat(no.fits()).isFalse();
    assertThat(no.failedOp()).isEqualTo("y");
    assertThat(no.failedBytes()).isEqualTo(4 * MIB);
    BfcReplay.Result ok = BfcReplay.replay(g, order, 18 * MIB);
    assertThat(ok.fits()).isTrue();
    // x, w and y (2 MiB each) and the three copies while y runs
    assertThat(ok.peakInUse()).isEqualTo(18 * MIB);
  }
  /**
   * An einsum that transposes its product into its output asks for the product first
   * ({@code ScratchEstimates#scratchFirst}), which sets the regions: a 4 MiB product, then the
   * 8 MiB output, grow regions of 4 and 8 MiB (14 in all with the 2 MiB one); the other way the
   * output would take an 8 MiB region and the product another (18). Under 13 MiB the request
   * that fails is the output.
   */
  @Test
  void anEinsumAsksForItsProductBeforeItsOutput() {
    DataflowGraph g = DataflowGraph.builder()
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(MIB))
        .op("e", "Einsum", OpCategory.FORWARD, List.of("w", "w"), Tensor.ofBytes(8 * MIB))
        .scratch("e", 4 * MIB)
        .build();
    int[] order = Levels.of(g).schedule();
    BfcReplay.Result no = BfcReplay.replay(g, order, 13 * MIB);
    assertThat(no.fits()).isFalse();
    assertThat(no.failedBytes()).isEqualTo(8 * MIB);
    assertThat(BfcReplay.replay(g, order, 14 * MIB).fits()).isTrue();
  }
}
