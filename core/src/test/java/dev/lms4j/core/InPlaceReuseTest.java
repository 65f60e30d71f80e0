package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.BufferAliases;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanApplier;
import dev.lms4j.core.plan.PlanSimulator;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TflmsSwapPlanner;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * In-place reuse by the only reader of a buffer (TensorFlow's {@code forward_input}), on graphs
 * whose kernels reuse ({@link DataflowGraph#inPlaceReuse()}).
 */
class InPlaceReuseTest {
  private static final long KB = 1024;

  private static Tensor f32(long bytes) {
    return new Tensor("float32", new long[] {bytes / 4}, bytes, false);
  }

  /**
   * The tail of a classifier: w (variable, 1 KB), x (feed, 1 KB), labels (feed, 8 KB);
   * logits = MatMul(x, w), 8 KB; xent = SoftmaxCrossEntropyWithLogits(logits, labels): loss
   * (1 KB) and its gradient (8 KB); loss_mean = Mean(loss); d = Mul(gradient, scale), 8 KB;
   * dw = MatMul(x, d), 1 KB. The gradient takes the logits' buffer (their only reader), the Mul
   * takes the gradient's (its only reader): one 8 KB buffer where three were counted.
   */
  private static DataflowGraph tail(boolean reuse) {
    return DataflowGraph.builder().inPlaceReuse(reuse)
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), f32(KB))
        .op("labels", "Placeholder", OpCategory.FORWARD, List.of(), f32(8 * KB))
        .op("scale", "Placeholder", OpCategory.FORWARD, List.of(), f32(8 * KB))
        .op("logits", "MatMul", OpCategory.FORWARD, List.of("x", "w"), f32(8 * KB))
        .op("xent", "SoftmaxCrossEntropyWithLogits", OpCategory.FORWARD, "",
            List.of("logits", "labels"), List.of(f32(KB), f32(8 * KB)))
        .op("loss_mean", "Mean", OpCategory.FORWARD, List.of("xent:0"), f32(4))
        .op("d", "Mul", OpCategory.BACKWARD, List.of("xent:1", "scale"), f32(8 * KB))
        .op("dw", "MatMul", OpCategory.BACKWARD, List.of("x", "d"), f32(KB))
        .build();
  }

  @Test
  void theOnlyReaderOfABufferTakesItOverAlongAChain() {
    DataflowGraph g = tail(true);
    TensorId logits = new TensorId(g.opOrThrow("logits").id(), 0);
    TensorId[][] owner = BufferAliases.owners(g);
    assertThat(owner[g.opOrThrow("xent").id()][1]).isEqualTo(logits);
    assertThat(owner[g.opOrThrow("d").id()][0]).isEqualTo(logits);
    assertThat(owner[g.opOrThrow("xent").id()][0])
        .isEqualTo(new TensorId(g.opOrThrow("xent").id(), 0));
    // resident: w 1 + x 1 + labels 8 + scale 8 = 18 KB; then logits 8 KB, xent adds its 1 KB
    // loss only (27), the Mul nothing, dw 1 KB (28 with the mean's 4 bytes gone)
    long resident = 18 * KB;
    assertThat(MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes())
        .isEqualTo(resident + 8 * KB + KB + 4);
    // without reuse: logits and the gradient are both alive while xent runs, then the gradient
    // and d while the Mul runs
    DataflowGraph off = tail(false);
    assertThat(MemorySimulator.simulate(off, Levels.of(off).schedule()).peakBytes())
        .isEqualTo(resident + 8 * KB + KB + 8 * KB);
    // the floor: the largest working set is one 8 KB buffer (plus xent's loss)
    assertThat(LowerBound.of(g)).isEqualTo(resident + 8 * KB + KB);
    assertThat(LowerBound.of(off)).isEqualTo(resident + 16 * KB + KB);
    // the allocator replay, which lets the last reader reuse in the order it replays, counts
    // the same either way (the mean's 4 bytes take the allocator's 256)
    assertThat(BfcReplay.replay(g, Levels.of(g).schedule(), 1L << 20).peakInUse())
        .isEqualTo(resident + 9 * KB + 256)
        .isEqualTo(BfcReplay.replay(off, Levels.of(off).schedule(), 1L << 20).peakInUse());
  }

  @Test
  void aBufferWithAnotherReaderAResidentInputOrAnotherSizeOrTypeIsNotTaken() {
    DataflowGraph g = DataflowGraph.builder().inPlaceReuse(true)
        .op("v", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(4 * KB))
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), f32(4 * KB))
        // a resident input: a Relu of a variable allocates
        .op("rv", "Relu", OpCategory.FORWARD, List.of("v"), f32(4 * KB))
        // two readers of rv: neither is its only reader
        .op("a", "Tanh", OpCategory.FORWARD, List.of("rv"), f32(4 * KB))
        .op("b", "Sigmoid", OpCategory.FORWARD, List.of("rv"), f32(4 * KB))
        // a's only reader, but its output has another dtype
        .op("c", "Neg", OpCategory.FORWARD, List.of("a"),
            new Tensor("int32", new long[] {KB}, 4 * KB, false))
        // b's only reader, but it reads b twice
        .op("d", "Mul", OpCategory.FORWARD, List.of("b", "b"), f32(4 * KB))
        // a broadcast: the 4 KB input is x's only reader's, the output is larger
        .op("e", "Add", OpCategory.FORWARD, List.of("d", "x"), f32(8 * KB))
        .build();
    TensorId[][] owner = BufferAliases.owners(g);
    for (String op : List.of("rv", "a", "b", "c", "d", "e")) {
      int id = g.opOrThrow(op).id();
      assertThat(owner[id][0]).as(op).isEqualTo(new TensorId(id, 0));
    }
  }

  @Test
  void aGraphKeepsItsReuseThroughEveryEdit() {
    DataflowGraph g = tail(true);
    assertThat(g.withScratch(Map.of("logits", 0L)).inPlaceReuse()).isTrue();
    assertThat(g.toBuilder().build().inPlaceReuse()).isTrue();
    assertThat(g.withoutScratch().inPlaceReuse()).isTrue();
    assertThat(tail(false).toBuilder().build().inPlaceReuse()).isFalse();
    SwapPlan p = TflmsSwapPlanner.plan(g, SwapParams.builder().swapoutThreshold(0).swapinAhead(1)
        .swapinGroupby(0).build());
    assertThat(PlanApplier.apply(g, p).inPlaceReuse()).isTrue();
  }

  /**
   * A tanh network: m_i = MatMul(h_{i-1}, w_i) and h_i = Tanh(m_i) forward (the Tanh takes
   * m_i's buffer), TanhGrad(h_i, dh_i) backward (takes dh_i's, or a swap-in of h_i that only it
   * reads). The fast plan simulator decides reuse after a plan's swap-ins rewired the reads, as
   * rewriting the graph and simulating it does: both agree on every plan.
   */
  @Test
  void thePlanSimulatorAgreesWithApplyThenSimulateWhenSwapsMoveReaders() {
    int layers = 8;
    long act = 64 * KB;
    DataflowGraphBuilder b = DataflowGraph.builder().inPlaceReuse(true);
    b.op("h0", "Placeholder", OpCategory.FORWARD, List.of(), f32(act));
    for (int i = 1; i <= layers; i++) {
      b.op("w" + i, "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(4 * KB));
      b.op("m" + i, "MatMul", OpCategory.FORWARD, List.of("h" + (i - 1), "w" + i), f32(act));
      b.op("h" + i, "Tanh", OpCategory.FORWARD, List.of("m" + i), f32(act));
    }
    b.op("loss", "Sum", OpCategory.FORWARD, List.of("h" + layers), f32(4));
    b.op("gradients/dh" + layers, "Fill", OpCategory.BACKWARD, List.of("loss"), f32(act));
    List<String> applies = new ArrayList<>();
    for (int i = layers; i >= 1; i--) {
      String g = "gradients/g" + i;
      b.op(g, "TanhGrad", OpCategory.BACKWARD, List.of("h" + i, "gradients/dh" + i), f32(act));
      b.op("gradients/dw" + i, "MatMul", OpCategory.BACKWARD, List.of("h" + (i - 1), g),
          Tensor.ofBytes(4 * KB));
      b.op("gradients/dh" + (i - 1), "MatMul", OpCategory.BACKWARD, List.of(g, "w" + i),
          f32(act));
      b.op("train/apply" + i, "ApplyGradientDescent", OpCategory.OPTIMIZER,
          List.of("w" + i, "gradients/dw" + i), Tensor.persistent(4 * KB));
      applies.add("^train/apply" + i);
    }
    b.op("train_op", "NoOp", OpCategory.OPTIMIZER, "", applies, List.of());
    DataflowGraph g = b.build();
    DataflowGraph off = g.toBuilder().inPlaceReuse(false).build();
    PlanSimulator fast = new PlanSimulator(g);
    PlanSimulator fastOff = new PlanSimulator(off);
    int checked = 0;
    int lower = 0;
    for (int th : new int[] {0, 1, 3}) {
      for (int ahead : new int[] {1, 2, 4}) {
        for (int gb : new int[] {0, 2}) {
          SwapPlan p = TflmsSwapPlanner.plan(g, SwapParams.builder().swapoutThreshold(th)
              .swapinAhead(ahead).swapinGroupby(gb).build());
          DataflowGraph r = PlanApplier.apply(g, p);
          long slow = MemorySimulator.simulate(r, Levels.of(r).schedule()).peakBytes();
          assertThat(fast.peak(p)).as("th %d ahead %d gb %d", th, ahead, gb).isEqualTo(slow);
          DataflowGraph rOff = PlanApplier.apply(off, p);
          long slowOff = MemorySimulator.simulate(rOff, Levels.of(rOff).schedule()).peakBytes();
          assertThat(fastOff.peak(p)).isEqualTo(slowOff);
          if (slow < slowOff) {
            lower++;
          }
          checked++;
        }
      }
    }
    assertThat(checked).isEqualTo(18);
    // reuse lowers the simulated peak of plans (the check above is not about equal graphs)
    assertThat(lower).isPositive();
    assertThat(fast.peak(SwapPlan.empty(SwapParams.defaults())))
        .isEqualTo(MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes())
        .isLessThan(MemorySimulator.simulate(off, Levels.of(off).schedule()).peakBytes());
  }
  /**
   * A fetched tensor (the loss a step returns) is held by the session until the step ends: its
   * only reader does not take its buffer over, and the buffer is freed after the step's last
   * op, not after its reader. Traced on the corpus mlp-mixed ({@code LMS4J_BFC_LOG}): the 4-byte
   * loss kept its chunk through the step and the loss scaling's {@code Mul} of it allocated its
   * own; the allocator model, which freed the loss there, found a 2 MiB chunk free that
   * TensorFlow did not, and said 102 MiB for a plan that needs 110.
   */
  @Test
  void aFetchedTensorIsHeldToTheStepsEndAndNotTakenOverInPlace() {
    DataflowGraph free = fetching(false);
    DataflowGraph held = fetching(true);
    assertThat(free.fetched()).isEmpty();
    TensorId h = new TensorId(held.opOrThrow("h").id(), 0);
    assertThat(held.fetched()).containsExactly(h);
    int y = held.opOrThrow("y").id();
    // not fetched, the Mul (h's only reader) writes into h's buffer; fetched, into its own
    assertThat(BufferAliases.owners(free)[y][0]).isEqualTo(h);
    assertThat(BufferAliases.owners(held)[y][0]).isEqualTo(new TensorId(y, 0));
    // resident: x 8 KB; then h and y alive together, and after them the 1 KB sum
    assertThat(MemorySimulator.simulate(free, Levels.of(free).schedule()).peakBytes())
        .isEqualTo(8 * KB + 8 * KB + KB);
    assertThat(MemorySimulator.simulate(held, Levels.of(held).schedule()).peakBytes())
        .isEqualTo(8 * KB + 16 * KB + KB);
    // the planners' fast simulator agrees (the planner's prediction is the plotted peak)
    assertThat(new PlanSimulator(held).peak(SwapPlan.empty(SwapParams.defaults())))
        .isEqualTo(8 * KB + 16 * KB + KB);
    assertThat(new PlanSimulator(free).peak(SwapPlan.empty(SwapParams.defaults())))
        .isEqualTo(8 * KB + 8 * KB + KB);
    // the allocator replay frees h's chunk only when the step is done: after the 1 KB sum has
    // been granted, in both of the replay's steps
    for (DataflowGraph g : List.of(free, held)) {
      List<String> log = new ArrayList<>();
      BfcReplay.requests(g, Levels.of(g).schedule(), 1L << 20, BfcReplay.Layout.GRAPH_ORDER,
          log::add);
      List<String> granted = log.stream().filter(l -> l.startsWith("A ")).toList();
      String hFreed = "F " + granted.indexOf(granted.stream().filter(l -> l.endsWith(" h"))
          .findFirst().orElseThrow());
      int sum = log.indexOf(log.stream().filter(l -> l.endsWith(" s")).findFirst()
          .orElseThrow());
      if (g == held) {
        assertThat(log.indexOf(hFreed)).isGreaterThan(sum);
        assertThat(granted).anyMatch(l -> l.endsWith(" y"));
      } else {
        assertThat(granted).noneMatch(l -> l.endsWith(" y"));
      }
    }
    // the fetch is kept by the graph's edits and by a copy through its builder
    assertThat(held.withoutScratch().fetched()).containsExactly(h);
    assertThat(held.toBuilder().build().fetched()).containsExactly(h);
  }

  /** x (feed, 8 KB); h = Relu(x), 8 KB, fetched where asked; y = Mul(h, h2); s = Sum(y), 1 KB. */
  private static DataflowGraph fetching(boolean fetch) {
    DataflowGraphBuilder b = DataflowGraph.builder().inPlaceReuse(true)
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), f32(8 * KB))
        .op("h", "Relu", OpCategory.FORWARD, List.of("x"), f32(8 * KB))
        .op("y", "Mul", OpCategory.FORWARD, List.of("h", "x"), f32(8 * KB))
        .op("s", "Sum", OpCategory.FORWARD, List.of("y"), f32(KB));
    if (fetch) {
      b.fetch("h");
    }
    return b.build();
  }
}
