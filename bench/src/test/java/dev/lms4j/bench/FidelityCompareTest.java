package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.tf.ScratchTrace;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.AllocatorMemoryUsed;
import org.tensorflow.proto.DeviceStepStats;
import org.tensorflow.proto.NodeExecStats;
import org.tensorflow.proto.StepStats;

/** The per-op comparison of the fidelity tool, on a hand-made graph and trace. */
class FidelityCompareTest {
  private static final long MIB = 1L << 20;

  /** A trace of one device's step stats, these nodes in this order. */
  private static ScratchTrace trace(NodeExecStats... nodes) {
    DeviceStepStats.Builder dev = DeviceStepStats.newBuilder();
    for (NodeExecStats n : nodes) {
      dev.addNodeStats(n);
    }
    return ScratchTrace.of(StepStats.newBuilder().addDevStats(dev).build());
  }

  private static NodeExecStats node(String name, long start, long inUse, long peak, long live) {
    return NodeExecStats.newBuilder().setNodeName(name).setAllStartMicros(start)
        .setTimelineLabel(name + " = Relu(x)")
        .addMemory(AllocatorMemoryUsed.newBuilder().setAllocatorBytesInUse(inUse)
            .setPeakBytes(peak).setLiveBytes(live)).build();
  }

  /** x (feed, 1 MiB) -> a, b (both read x, 2 MiB each) -> c = a + b (2 MiB). */
  private static DataflowGraph twoReluSum() {
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(MIB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(2 * MIB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(2 * MIB))
        .op("c", "AddV2", OpCategory.FORWARD, List.of("a", "b"), Tensor.ofBytes(2 * MIB))
        .build();
  }

  /**
   * {@link #twoReluSum}. TensorFlow ran b before a (the levelled schedule runs a first); b held
   * 5 MiB of scratch. Simulated in the traced order without scratch: b 1+2 = 3, a 3+2 = 5, c 5+2
   * = 7 MiB; with b's scratch b is at 8. Traced (bytes in use before + the op's high-water
   * mark): b 0+7 = 7, a 2+2 = 4, c 4+2 = 6.
   */
  @Test
  void comparesPerOpInTheTracedOrderAndSortsByTheGap() {
    DataflowGraph g = twoReluSum();
    ScratchTrace t = trace(node("b", 1, 2 * MIB, 7 * MIB, 2 * MIB),
        node("a", 2, 4 * MIB, 2 * MIB, 2 * MIB), node("c", 3, 2 * MIB, 2 * MIB, 2 * MIB));
    int[] order = t.orderOf(g);
    assertThat(List.of(g.op(order[1]).name(), g.op(order[2]).name())).containsExactly("b", "a");
    Fidelity.Comparison c = Fidelity.compare(g, t);
    // the feed is resident: no row; the largest gap first (b: traced 7, estimated 3, as the
    // estimate gives a Relu no scratch), then a and c (1 MiB each, by name)
    assertThat(c.rows).extracting(Fidelity.Row::op).containsExactly("b", "a", "c");
    Fidelity.Row b = c.rows.get(0);
    assertThat(b.gap()).isEqualTo(4 * MIB);
    assertThat(b.old()).isEqualTo(3 * MIB);
    assertThat(b.measured()).isEqualTo(8 * MIB);
    assertThat(b.traced()).isEqualTo(7 * MIB);
    assertThat(b.scratch()).isEqualTo(5 * MIB);
    assertThat(c.rows.get(2).gap()).isEqualTo(-MIB); // c: traced 6, simulated 7
    // the allocator model in the traced order: x's chunk in the first 2 MiB region, b in half
    // of a 4 MiB region (3 MiB in use), a in its other half (5); c, the last reader of both,
    // adds in place into one of them (5, where the live-bytes sum without reuse says 7)
    assertThat(c.rows).extracting(Fidelity.Row::alloc)
        .containsExactly(3 * MIB, 5 * MIB, 5 * MIB);
    assertThat(c.table("g", 5)).contains("alloc");
    assertThat(c.largestScratchOp).isEqualTo("b");
    // levelled peaks: without scratch 7 MiB (at c), with b's 5 MiB: 1+2+2+5 = 10 at b
    assertThat(c.peakOld).isEqualTo(7 * MIB);
    assertThat(c.peakMeasured).isEqualTo(10 * MIB);
    assertThat(c.table("g", 5)).contains("largest scratch 5.0 MiB (b)");
  }

  /**
   * The same graph, traced under a budget: b, then a; c added in place (no memory statistics,
   * as TensorFlow records none for an op that allocated nothing). Under 8 MiB the model's
   * chunks are as above (b 3, a 5 MiB); under 5 MiB the second region is cut to 3 MiB and b,
   * less than twice 2 MiB, gets it whole (4 MiB in use), so a finds no room.
   */
  @Test
  void comparesTheAllocatorModelWithATraceUnderTheSameLimit() {
    DataflowGraph g = twoReluSum();
    ScratchTrace t = trace(node("b", 1, 3 * MIB, 2 * MIB, 2 * MIB),
        node("a", 2, 6 * MIB, 2 * MIB, 2 * MIB), NodeExecStats.newBuilder().setNodeName("c")
            .setAllStartMicros(3).setTimelineLabel("c = AddV2(a, b)").build());
    Fidelity.AtBudget at8 = Fidelity.compareAtBudget(g, t, 8 * MIB);
    assertThat(at8.rows).extracting(Fidelity.AtBudget.Row::op).containsExactly("a", "b");
    assertThat(at8.rows).extracting(Fidelity.AtBudget.Row::alloc)
        .containsExactly(5 * MIB, 3 * MIB);
    assertThat(at8.rows.get(0).gap()).isEqualTo(MIB);
    assertThat(at8.within(MIB / 2)).isEqualTo(1);
    assertThat(at8.medianAbsGap()).isEqualTo(MIB);
    assertThat(at8.modelPeak).isEqualTo(5 * MIB);
    assertThat(at8.tracedPeak).isEqualTo(6 * MIB);
    assertThat(at8.modelFailedAt).isNull();
    Fidelity.AtBudget at5 = Fidelity.compareAtBudget(g, t, 5 * MIB);
    assertThat(at5.rows).extracting(Fidelity.AtBudget.Row::op).containsExactly("b");
    assertThat(at5.rows.get(0).alloc()).isEqualTo(4 * MIB);
    assertThat(at5.rows.get(0).gap()).isEqualTo(-MIB);
    // the model fails at a (TensorFlow did not): said, not hidden behind b's peak
    assertThat(at5.modelFailedAt).isEqualTo("a");
    assertThat(at5.opsNotCompared).isEqualTo(2);
    assertThat(at5.modelPeak).isEqualTo(4 * MIB);
  }

  /** The at-the-minimum table: a row per graph measured with it, its error where it failed. */
  @Test
  void markdownShowsTheComparisonAtTheRealMinimum() {
    ObjectNode root = root();
    var graphs = root.putArray("graphs");
    ObjectNode at = atMin(graphs, "unet3d b1", 29, 27, 26, 150, 140, MIB / 4);
    at.putArray("top_gaps").addObject().put("op", "bn").put("type", "FusedBatchNormV3")
        .put("allocator", 20 * MIB).put("traced", 22 * MIB);
    graphs.addObject().put("graph", "lenet b100").putObject("no_lms")
        .put("min_budget_mib", 95).putObject("at_min").put("budget_mib", 95)
        .put("error", "the traced run failed: OOM");
    graphs.addObject().put("graph", "old").putObject("no_lms").put("min_budget_mib", 9);
    atMin(graphs, "vgg16 b16", 40, 38, 30, 90, 80, MIB / 2).put("allocator_fits", false)
        .put("allocator_failed_at", "conv9").put("ops_not_compared", 60).putArray("top_gaps");
    String md = Fidelity.markdown(root);
    assertThat(md).contains("| vgg16 b16 | 40 MiB | 38.0 | 30.0 (out of memory at conv9, 60 "
        + "ops not compared) | 80 of 90 | 0.50 | - |");
    assertThat(md).contains("| unet3d b1 | 29 MiB | 27.0 | 26.0 | 140 of 150 | 0.25 | "
        + "bn (FusedBatchNormV3): 20.0 / 22.0 |");
    assertThat(md).contains("| lenet b100 | 95 MiB | the traced run failed: OOM |");
    assertThat(md).doesNotContain("| old | 9 MiB |");
  }

  /** A result file's root, with the fields every table's heading reads. */
  private static ObjectNode root() {
    return new ObjectMapper().createObjectNode().put("command", "c").put("machine", "m")
        .put("wall_seconds", 60).put("steps_per_probe", 2).put("resolution", 0.03)
        .put("plan_fractions", "[0.6]");
  }

  /** A graph measured at its real minimum: the at-the-minimum node, figures in MiB. */
  private static ObjectNode atMin(com.fasterxml.jackson.databind.node.ArrayNode graphs,
      String graph, long budget, long traced, long model, int compared, int within, long gap) {
    return graphs.addObject().put("graph", graph).putObject("no_lms")
        .put("min_budget_mib", budget).putObject("at_min").put("budget_mib", budget)
        .put("traced_peak_bytes", traced * MIB).put("allocator_peak_bytes", model * MIB)
        .put("ops_compared", compared).put("within_half_mib", within)
        .put("median_abs_gap_bytes", gap);
  }

  @Test
  void markdownShowsErrorsAgainstTheRealMinimum() {
    ObjectNode root = root();
    ObjectNode g = root.putArray("graphs").addObject().put("graph", "lenet b100")
        .put("traced_peak_bytes", 90 * MIB).put("traced_peak_with_scratch_bytes", 95 * MIB)
        .put("largest_traced_scratch_bytes", 21 * MIB);
    g.putObject("no_lms").put("min_budget_mib", 100).put("predicted_old_bytes", 80 * MIB)
        .put("predicted_new_bytes", 95 * MIB).put("predicted_measured_scratch_bytes", 102 * MIB);
    String md = Fidelity.markdown(root);
    assertThat(md).contains("| lenet b100 | no LMS | 100 MiB | 80.0 (-20%) | 95.0 (-5%) | "
        + "102.0 (+2%) |");
  }

  /**
   * The init column: init alone in the best order [in the graph's order], and the run's need
   * (the larger of init in the graph's order and the step's allocator need) against the real
   * minimum.
   */
  @Test
  void markdownShowsInitsNeedAndTheRunsBesideTheSteps() {
    ObjectNode root = root();
    ObjectNode g = root.putArray("graphs").addObject().put("graph", "init-heavy (bench)")
        .put("traced_peak_bytes", 133 * MIB).put("traced_peak_with_scratch_bytes", 133 * MIB)
        .put("largest_traced_scratch_bytes", 0);
    g.putObject("no_lms").put("min_budget_mib", 236).put("predicted_old_bytes", 102 * MIB)
        .put("predicted_new_bytes", 102 * MIB).put("predicted_measured_scratch_bytes", 102 * MIB)
        .put("allocator_bytes", 134 * MIB).put("allocator_measured_scratch_bytes", 134 * MIB)
        .put("predicted_init_bytes", 228 * MIB)
        .put("predicted_init_graph_order_bytes", 259 * MIB);
    ObjectNode light = root.withArray("graphs").addObject().put("graph", "lstm (bench)")
        .put("traced_peak_bytes", 170 * MIB).put("traced_peak_with_scratch_bytes", 170 * MIB)
        .put("largest_traced_scratch_bytes", 0);
    light.putObject("no_lms").put("min_budget_mib", 180).put("predicted_old_bytes", 170 * MIB)
        .put("predicted_new_bytes", 170 * MIB).put("predicted_measured_scratch_bytes", 170 * MIB)
        .put("allocator_bytes", 180 * MIB).put("allocator_measured_scratch_bytes", 180 * MIB)
        .put("predicted_init_bytes", 4 * MIB).put("predicted_init_graph_order_bytes", 6 * MIB);
    String md = Fidelity.markdown(root);
    assertThat(md).contains("| 134.0 (-43%) | 134.0 (-43%) | 228.0 [259.0] | 259.0 (+10%) | "
        + "133.0 (133.0) |");
    assertThat(md).contains("| 180.0 (+0%) | 180.0 (+0%) | 4.0 [6.0] | 180.0 (+0%) | ");
  }

  /** The result files name the graphs a run was given as the options that select them. */
  @Test
  void recordedCommandNamesTheGraphsGiven() {
    assertThat(Fidelity.command("fidelity", Fidelity.defaults(), Fidelity.defaults()))
        .isEqualTo("./lms4j bench --suite fidelity");
    assertThat(Fidelity.command("fidelity", List.of(Fidelity.corpus("mobilenet",
        dev.lms4j.train.corpus.Corpus.Size.BENCH)), Fidelity.defaults()))
        .isEqualTo("./lms4j bench --suite fidelity --families mobilenet");
    assertThat(Fidelity.command("acceptance", List.of(
        Fidelity.zoo("resnet50", 8, java.util.Map.of("width", "16", "image", "32")),
        Fidelity.corpus("lstm", dev.lms4j.train.corpus.Corpus.Size.SMALL),
        Fidelity.corpus("gru", dev.lms4j.train.corpus.Corpus.Size.SMALL)), Fidelity.defaults()))
        .isEqualTo("./lms4j bench --suite acceptance --model resnet50 --batch 8 -o image=32 "
            + "-o width=16 --families lstm,gru --size small");
  }
}
