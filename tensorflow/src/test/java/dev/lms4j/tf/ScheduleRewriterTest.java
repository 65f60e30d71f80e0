package dev.lms4j.tf;

import static dev.lms4j.tf.TfTests.nodes;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.schedule.ScheduleEdges.Edge;
import dev.lms4j.core.schedule.Schedulers;
import dev.lms4j.tf.run.SyntheticFeeds;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.RunOptions;

class ScheduleRewriterTest {
  private static final int BATCH = 64;
  private final TrainingGraph net = TinyNet.build(BATCH, 128, 6);

  private static DataflowGraph model(TrainingGraph tg) {
    return GraphImporter.importGraph(tg.graphDef(), Map.of(), -1, "gradients",
        Set.of("loss", "train_op"));
  }

  private List<Double> losses(GraphDef gd) {
    return TfTests.losses(gd, net.manifest());
  }

  /**
   * TinyNet, 6 hidden layers of 128 units, batch 64: activations and their gradients are
   * 64 x 128 x 4 = 32 KiB, hidden weights 64 KiB. In the backward pass the levelled order runs,
   * per layer, the input gradient (gradients/MatMul_2k) before the weight gradient
   * (gradients/MatMul_2k+1, 64 KiB), so both are alive together; the list scheduler runs the
   * weight gradient first and its update right after the ReLU gradient, so it is freed early:
   * simulated peak 807,996 B levelled, 775,228 B list (-4.1%; the loss gradient written into
   * the logits' buffer, as TensorFlow's softmax cross-entropy kernel does, and the fed batch
   * and labels in host memory, outside the device's budget). TensorFlow runs the list order
   * once 12 control edges are added; grappler keeps them all (dependency optimizer off), and
   * the losses stay bit-identical (updates still follow every read of their weight).
   */
  @Test
  void listScheduleIsEnforcedByFewEdgesThatSurviveGrappler() {
    DataflowGraph g = model(net);
    ScheduleRewriter.Result r = ScheduleRewriter.schedule(net.graphDef(), g);
    assertThat(r.choice().peaks().get(Schedulers.Kind.LEVELS)).isEqualTo(807_996);
    assertThat(r.kind()).isEqualTo(Schedulers.Kind.LIST);
    assertThat(r.peakBytes()).isEqualTo(775_228);
    assertThat(r.edges()).hasSize(12).contains(
        new Edge("gradients/MatMul_1", "gradients/MatMul"),
        new Edge("gradients/ReluGrad", "ApplyGradientDescent_6"));

    // each edge is one ^from input of its op, and TensorFlow accepts the graph (no cycle)
    Map<String, NodeDef> out = nodes(r.graphDef());
    for (Edge e : r.edges()) {
      assertThat(out.get(e.to()).getInputList()).containsOnlyOnce("^" + e.from());
    }
    assertThat(r.graphDef().getNodeCount()).isEqualTo(net.graphDef().getNodeCount());
    try (Graph imported = new Graph()) {
      imported.importGraphDef(r.graphDef());
    }
    // the model of the rewritten graph has the list schedule's peak in its levelled order
    DataflowGraph ordered = model(new TrainingGraph(r.graphDef(), net.manifest()));
    assertThat(MemorySimulator.simulate(ordered, Levels.of(ordered).schedule()).peakBytes())
        .isEqualTo(775_228);

    // the graph as executed (after grappler) still holds every edge
    Map<String, NodeDef> executed = nodes(SwapRewriterTest.executedGraph(r.graphDef(),
        SessionConfigs.lms()));
    for (Edge e : r.edges()) {
      assertThat(executed.get(e.to()).getInputList()).as(e.toString()).contains("^" + e.from());
    }
    assertThat(losses(r.graphDef())).containsExactlyElementsOf(losses(net.graphDef()));
  }

  /**
   * TensorFlow runs the memory-relevant ops in the schedule's order: every op of the model that
   * allocates 1 KiB or more comes in the traced step exactly as in the list schedule; without the
   * edges, in another order.
   */
  @Test
  void tensorflowRunsTheScheduledOrder() {
    DataflowGraph g = model(net);
    ScheduleRewriter.Result r = ScheduleRewriter.schedule(net.graphDef(), g);
    List<String> planned = new ArrayList<>();
    for (int v : r.choice().order()) {
      if (g.op(v).transientOutputBytes() >= 1024 && !MemorySimulator.isPinned(g.op(v))) {
        planned.add(g.op(v).name());
      }
    }
    List<String> ran = executedOrder(r.graphDef()).stream().filter(planned::contains).toList();
    assertThat(ran).isEqualTo(planned);
    List<String> before = executedOrder(net.graphDef()).stream().filter(planned::contains)
        .toList();
    assertThat(before).containsExactlyInAnyOrderElementsOf(planned).isNotEqualTo(planned);
  }

  /**
   * Negative case: without hidden layers (softmax regression) every scheduler peaks at
   * 5,156 B (the 4-byte loss held to the end of the step), the levelled order is kept and the
   * graph is returned as it was. A gain below the threshold is not worth edges either: TinyNet's 4.1% is not enforced at a 5% threshold.
   */
  @Test
  void levelledOrderNeedsNoEdges() {
    TrainingGraph linear = TinyNet.build(BATCH, 128, 0);
    ScheduleRewriter.Result r = ScheduleRewriter.schedule(linear.graphDef(), model(linear));
    assertThat(r.choice().peaks().values()).containsOnly(5_156L);
    assertThat(r.kind()).isEqualTo(Schedulers.Kind.LEVELS);
    assertThat(r.edges()).isEmpty();
    assertThat(r.graphDef()).isSameAs(linear.graphDef());

    ScheduleRewriter.Result small = ScheduleRewriter.schedule(net.graphDef(), model(net), 0.05);
    assertThat(small.choice().kind()).isEqualTo(Schedulers.Kind.LIST);
    assertThat(small.kind()).isEqualTo(Schedulers.Kind.LEVELS);
    assertThat(small.peakBytes()).isEqualTo(807_996);
    assertThat(small.edges()).isEmpty();
    assertThat(small.graphDef()).isSameAs(net.graphDef());
  }

  @Test
  void rewriteSkipsEdgesAlreadyThereAndRefusesCyclesAndUnknownOps() {
    GraphDef gd = net.graphDef();
    // relu0 reads layer0 already; the second edge is given twice
    GraphDef out = ScheduleRewriter.rewrite(gd, List.of(new Edge("layer0", "relu0"),
        new Edge("relu0", "layer2"), new Edge("relu0", "layer2")));
    Map<String, NodeDef> n = nodes(out);
    assertThat(n.get("relu0").getInputList()).isEqualTo(nodes(gd).get("relu0").getInputList());
    assertThat(n.get("layer2").getInputList()).containsOnlyOnce("^relu0");
    assertThat(ScheduleRewriter.rewrite(gd, List.of())).isSameAs(gd);
    assertThatThrownBy(() -> ScheduleRewriter.rewrite(gd, List.of(new Edge("loss", "layer0"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("cycle");
    assertThatThrownBy(() -> ScheduleRewriter.rewrite(gd, List.of(new Edge("nope", "layer0"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("nope");
    assertThatThrownBy(() -> ScheduleRewriter.schedule(gd, model(net), 1.0))
        .isInstanceOf(IllegalArgumentException.class);
    // the input is not changed
    assertThat(nodes(gd).get("layer2").getInputList()).doesNotContain("^relu0");
  }

  /** Names of the ops of one traced training step, in the order TensorFlow ran them. */
  private List<String> executedOrder(GraphDef gd) {
    List<String> order = new ArrayList<>();
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      try (Session s = new Session(g, SessionConfigs.lms())) {
        s.runner().addTarget("init").run();
        Session.Runner runner = s.runner();
        List<org.tensorflow.Tensor> feeds = new ArrayList<>();
        try {
          for (int i = 0; i < net.manifest().feeds().size(); i++) {
            var t = SyntheticFeeds.make(net.manifest().feeds().get(i), i, 1, 1);
            feeds.add(t);
            runner.feed(net.manifest().feeds().get(i).name(), t);
          }
          runner.addTarget("train_op").setOptions(RunOptions.newBuilder()
              .setTraceLevel(RunOptions.TraceLevel.FULL_TRACE).build());
          try (Result res = runner.runAndFetchMetadata()) {
            res.getMetadata().orElseThrow().getStepStats().getDevStatsList().forEach(d ->
                d.getNodeStatsList().forEach(ns -> order.add(ns.getNodeName())));
          }
        } finally {
          feeds.forEach(org.tensorflow.Tensor::close);
        }
      }
    }
    return order;
  }

  /**
   * A merged filter and bias gradient count as one op: an order that has the bias gradient's
   * reader run before an op the filter gradient waits on is a cycle once they are merged, which
   * TensorFlow would run without an error, skipping it. Where the two are not merged (different
   * control inputs) it is no cycle.
   */
  @Test
  void aCycleThroughAMergedBiasAndFilterGradientIsFound() {
    GraphDef gd = GraphDef.newBuilder()
        .addNode(n("x", "Placeholder"))
        .addNode(n("dy", "Relu", "x"))
        .addNode(n("sizes", "Const"))
        .addNode(n("db", "BiasAddGrad", "dy"))
        .addNode(n("update", "NoOp", "db"))
        .addNode(n("dx", "Relu", "dy", "^update"))
        .addNode(n("act", "Relu", "x", "^dx"))
        .addNode(n("dw", "Conv2DBackpropFilter", "act", "sizes", "dy"))
        .build();
    assertThat(ScheduleRewriter.cycle(gd)).contains("db", "dw");
    assertThatThrownBy(() -> ScheduleRewriter.checkAcyclic(gd))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("cycle");
    GraphDef apart = gd.toBuilder().setNode(3, n("db", "BiasAddGrad", "dy", "^x")).build();
    assertThat(ScheduleRewriter.cycle(apart)).isEmpty();
  }

  private static NodeDef n(String name, String op, String... inputs) {
    return NodeDef.newBuilder().setName(name).setOp(op).addAllInput(List.of(inputs)).build();
  }
}
