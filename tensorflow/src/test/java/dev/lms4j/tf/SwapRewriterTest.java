package dev.lms4j.tf;

import static dev.lms4j.tf.TfTests.nodes;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanApplier;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.plan.TflmsSwapPlanner;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.RewriterConfig;
import org.tensorflow.proto.RunOptions;

class SwapRewriterTest {
  private static final int BATCH = 64;
  private final TrainingGraph net = TinyNet.build(BATCH, 128, 6);

  private DataflowGraph model() {
    return GraphImporter.importGraph(net.graphDef(), Map.of(), -1, "gradients",
        Set.of("loss", "train_op"));
  }

  private static SwapParams params(Tier tier) {
    return SwapParams.builder().swapoutThreshold(3).swapinAhead(1).swapinGroupby(0).tier(tier)
        .build();
  }

  @Test
  void importerReadsShapesSizesAndCategories() {
    DataflowGraph g = model();
    // relu0: [64, 128] float32 = 32 KiB; w0 is a ref variable [32, 128]
    assertThat(g.opOrThrow("relu0").output(0).bytes()).isEqualTo(64 * 128 * 4);
    assertThat(g.opOrThrow("relu0").output(0).shape()).containsExactly(64, 128);
    assertThat(g.opOrThrow("w0").output(0).persistent()).isTrue();
    assertThat(g.persistentBytes()).isEqualTo(4L * (32 * 128 + 5 * 128 * 128 + 128 * 10));
    assertThat(g.opOrThrow("relu0").category()).isEqualTo(OpCategory.FORWARD);
    assertThat(g.ops().stream().filter(o -> o.name().startsWith("gradients/")))
        .allMatch(o -> o.category() == OpCategory.BACKWARD);
    assertThat(g.ops().stream().filter(o -> o.type().equals("ApplyGradientDescent")))
        .allMatch(o -> o.category() == OpCategory.OPTIMIZER);
  }

  @Test
  void unknownBatchNeedsToBeGiven() {
    GraphDef gd = net.graphDef().toBuilder().clearNode().addAllNode(net.graphDef().getNodeList()
        .stream().map(n -> n.getName().equals("x") ? n.toBuilder().putAttr("shape",
            org.tensorflow.proto.AttrValue.newBuilder().setShape(
                org.tensorflow.proto.TensorShapeProto.newBuilder()
                    .addDim(org.tensorflow.proto.TensorShapeProto.Dim.newBuilder().setSize(-1))
                    .addDim(org.tensorflow.proto.TensorShapeProto.Dim.newBuilder().setSize(32)))
                .build()).build() : n).toList()).build();
    assertThatThrownBy(() -> GraphImporter.importGraph(gd, Map.of(), -1, "gradients"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unknown batch dimension");
    DataflowGraph g = GraphImporter.importGraph(gd, Map.of(), 16, "gradients");
    assertThat(g.opOrThrow("relu0").output(0).shape()).containsExactly(16, 128);
  }

  @Test
  void hostTierRewriteHasSwapNodesTriggersAndRepointedConsumers() {
    SwapPlan plan = TflmsSwapPlanner.plan(model(), params(Tier.HOST));
    assertThat(plan.swapOuts()).isNotEmpty();
    GraphDef out = SwapRewriter.rewrite(net.graphDef(), plan, Tier.HOST, null, null);
    Map<String, NodeDef> n = nodes(out);
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      assertThat(n.get(so.name()).getOp()).isEqualTo("SerializeTensor");
      assertThat(n.get(so.name()).getInput(0)).isIn(so.tensorName(), so.producer());
      for (SwapPlan.SwapIn si : so.swapIns()) {
        NodeDef in = n.get(si.name());
        assertThat(in.getOp()).isEqualTo("ParseTensor");
        assertThat(in.getInput(0)).isEqualTo(so.name());
        assertThat(in.getInputList()).containsAll(
            si.triggers().stream().map(t -> "^" + t).toList());
        assertThat(in.getAttrOrThrow("_grappler_do_not_remove").getB()).isTrue();
        for (String c : si.consumers()) {
          assertThat(n.get(c).getInputList()).contains(si.name())
              .doesNotContain(so.tensorName());
        }
      }
    }
    // TensorFlow accepts it (no dangling names, no cycles)
    try (Graph g = new Graph()) {
      g.importGraphDef(out);
    }
    assertThat(SwapRewriter.isRewritten(out)).isTrue();
    assertThat(SwapRewriter.isRewritten(net.graphDef())).isFalse();
  }

  /**
   * The disk tier with standard ops: SerializeTensor -> WriteFile(path) after the producer; per
   * swap-in ReadFile(path) waiting for the write and for the triggers, then ParseTensor feeding
   * the re-pointed consumers; the file truncated after its last read, before the anchor op.
   * With the native ops: one Lms4jSwapOutDisk and one Lms4jSwapInDisk per swap-in carrying the
   * same path, the triggers on the swap-in.
   */
  @Test
  void diskTierRewriteWritesReadsAndTruncatesTheFile(@TempDir Path dir) {
    SwapPlan plan = TflmsSwapPlanner.plan(model(), params(Tier.DISK));
    assertThat(plan.swapOuts()).isNotEmpty();
    GraphDef out = SwapRewriter.rewrite(net.graphDef(), plan, Tier.DISK, dir, "train_op",
        SwapRewriter.Mechanism.STANDARD);
    Map<String, NodeDef> n = nodes(out);
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      assertThat(n.get(so.name()).getOp()).isEqualTo("SerializeTensor");
      assertThat(n.get(so.name()).getInput(0)).isIn(so.tensorName(), so.producer());
      NodeDef write = n.get(so.name() + "/write");
      assertThat(write.getOp()).isEqualTo("WriteFile");
      assertThat(write.getInputList()).containsExactly(so.name() + "/path", so.name());
      String path = n.get(so.name() + "/path").getAttrOrThrow("value").getTensor()
          .getStringVal(0).toStringUtf8();
      assertThat(Path.of(path).getParent()).isEqualTo(dir);
      for (SwapPlan.SwapIn si : so.swapIns()) {
        NodeDef read = n.get(si.name() + "/read");
        assertThat(read.getOp()).isEqualTo("ReadFile");
        assertThat(read.getInputList()).startsWith(so.name() + "/path", "^" + so.name()
            + "/write").containsAll(si.triggers().stream().map(t -> "^" + t).toList());
        NodeDef in = n.get(si.name());
        assertThat(in.getOp()).isEqualTo("ParseTensor");
        assertThat(in.getInputList()).containsExactly(si.name() + "/read");
        for (String c : si.consumers()) {
          assertThat(n.get(c).getInputList()).contains(si.name()).doesNotContain(so.tensorName());
        }
      }
      NodeDef trunc = n.get(so.name() + "/truncate");
      assertThat(trunc.getOp()).isEqualTo("WriteFile");
      assertThat(trunc.getInputList()).startsWith(so.name() + "/path", so.name() + "/empty")
          .containsAll(so.swapIns().stream().map(si -> "^" + si.name() + "/read").toList());
      assertThat(n.get("train_op").getInputList()).contains("^" + so.name() + "/truncate");
    }
    try (Graph g = new Graph()) {
      g.importGraphDef(out);
    }

    GraphDef nat = SwapRewriter.rewrite(net.graphDef(), plan, Tier.DISK, dir, "train_op",
        SwapRewriter.Mechanism.NATIVE);
    Map<String, NodeDef> m = nodes(nat);
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      NodeDef o = m.get(so.name());
      assertThat(o.getOp()).isEqualTo(NativeSwap.SWAP_OUT_DISK);
      String path = o.getAttrOrThrow("path").getS().toStringUtf8();
      assertThat(Path.of(path).getParent()).isEqualTo(dir);
      assertThat(m).doesNotContainKey(so.name() + "/write");
      for (SwapPlan.SwapIn si : so.swapIns()) {
        NodeDef in = m.get(si.name());
        assertThat(in.getOp()).isEqualTo(NativeSwap.SWAP_IN_DISK);
        assertThat(in.getAttrOrThrow("path").getS().toStringUtf8()).isEqualTo(path);
        assertThat(in.getInputList()).startsWith(so.name())
            .containsAll(si.triggers().stream().map(t -> "^" + t).toList());
      }
    }
  }

  /**
   * A graph rewritten with the native host swap ops, imported again (as {@code analyze} and
   * {@code run} do with a graph {@code rewrite} wrote), has the host copies outside the budget:
   * its simulated peak is the plan's, not the plan's plus the swapped bytes (ResNet-18 at 14 MiB
   * with auto: 11.2 MiB on import against the plan's 9.2, one 2 MiB swap-out).
   */
  @Test
  void aRewrittenGraphImportedAgainKeepsItsHostCopiesOutOfTheBudget() {
    DataflowGraph g = model();
    SwapPlan plan = TflmsSwapPlanner.plan(g, params(Tier.HOST));
    assertThat(plan.swapOuts()).isNotEmpty();
    DataflowGraph applied = PlanApplier.apply(g, plan);
    long planned = MemorySimulator.simulate(applied, Levels.of(applied).schedule()).peakBytes();
    for (SwapRewriter.Mechanism mech : List.of(SwapRewriter.Mechanism.NATIVE,
        SwapRewriter.Mechanism.NATIVE_ASYNC)) {
      GraphDef out = SwapRewriter.rewrite(net.graphDef(), plan, Tier.HOST, null, "train_op",
          mech);
      DataflowGraph again = GraphImporter.importGraph(out, Map.of(), -1, "gradients",
          Set.of("loss", "train_op"));
      for (SwapPlan.SwapOut so : plan.swapOuts()) {
        // the native ops carry the model's swap types, as the plan's model has them
        assertThat(again.opOrThrow(so.name()).type()).isEqualTo(OpTypes.SWAP_OUT);
        assertThat(again.opOrThrow(so.name()).output(0).bytes()).as(so.name()).isZero();
        for (SwapPlan.SwapIn si : so.swapIns()) {
          assertThat(again.opOrThrow(si.name()).type()).isEqualTo(OpTypes.SWAP_IN);
          // the swap-in's copy is device memory
          assertThat(again.opOrThrow(si.name()).output(0).bytes()).isEqualTo(
              g.opOrThrow(so.producer()).output(so.output()).bytes()).isPositive();
        }
      }
      assertThat(MemorySimulator.simulate(again, Levels.of(again).schedule()).peakBytes())
          .as(mech.name()).isEqualTo(planned);
      // so the cost model prices the swaps as transfers, not as compute
      CostModel cost = CostModel.defaults();
      assertThat(cost.computeMs(again)).as(mech.name()).isEqualTo(cost.computeMs(applied));
      assertThat(cost.unhiddenMs(again, Tier.HOST)).as(mech.name())
          .isEqualTo(cost.unhiddenMs(applied, Tier.HOST)).isPositive();
    }
    assertThat(GraphImporter.modelType(NativeSwap.SWAP_OUT_DISK)).isEqualTo(OpTypes.SWAP_OUT);
    assertThat(GraphImporter.modelType(NativeSwap.SWAP_IN_DISK)).isEqualTo(OpTypes.SWAP_IN);
    assertThat(GraphImporter.modelType("MatMul")).isEqualTo("MatMul");
  }

  @Test
  void devicePlacementTierPlacesIdentitiesOnHostAndBack() {
    SwapPlan plan = TflmsSwapPlanner.plan(model(), params(Tier.DEVICE_PLACEMENT));
    GraphDef out = SwapRewriter.rewrite(net.graphDef(), plan, Tier.DEVICE_PLACEMENT, null, null);
    Map<String, NodeDef> n = nodes(out);
    SwapPlan.SwapOut so = plan.swapOuts().get(0);
    assertThat(n.get(so.name()).getOp()).isEqualTo("Identity");
    assertThat(n.get(so.name()).getDevice()).isEqualTo("/device:CPU:0");
    NodeDef in = n.get(so.swapIns().get(0).name());
    assertThat(in.getOp()).isEqualTo("Identity");
    assertThat(in.getDevice()).isEqualTo("/device:GPU:0");
    assertThat(in.getInput(0)).isEqualTo(so.name());
  }

  @Test
  void alreadyRewrittenGraphIsLeftAlone() {
    Lms lms = Lms.builder().params(params(Tier.HOST)).build();
    LmsResult once = lms.rewrite(net);
    assertThat(once.rewritten()).isTrue();
    LmsResult twice = lms.rewrite(new TrainingGraph(once.graphDef(), net.manifest()));
    assertThat(twice.rewritten()).isFalse();
    assertThat(twice.graphDef()).isEqualTo(once.graphDef());
  }

  @Test
  void runOnAGraphReturnsANewRewrittenGraphAndLeavesTheOriginal() {
    Lms lms = Lms.builder().params(params(Tier.HOST)).build();
    try (Graph g = new Graph()) {
      g.importGraphDef(net.graphDef());
      int before = g.toGraphDef().getNodeCount();
      try (Graph r = lms.run(g)) {
        assertThat(r.toGraphDef().getNodeCount()).isGreaterThan(before);
        assertThat(r.operation(lms.rewrite(net).plan().swapOuts().get(0).name())).isNotNull();
      }
      assertThat(g.toGraphDef().getNodeCount()).isEqualTo(before);
    }
  }

  @Test
  void lossesAreIdenticalThroughHostAndDiskTiers(@TempDir Path dir) {
    List<Double> plain = losses(net.graphDef());
    // the standard-op path (NativeSwapTest covers the native one)
    LmsResult host = Lms.builder().params(params(Tier.HOST)).swapPath(SwapPath.STANDARD).build()
        .rewrite(net);
    LmsResult disk = Lms.builder().params(params(Tier.DISK)).swapDir(dir)
        .swapPath(SwapPath.STANDARD).build().rewrite(net);
    assertThat(losses(host.graphDef())).containsExactlyElementsOf(plain);
    assertThat(losses(disk.graphDef())).containsExactlyElementsOf(plain);
    // disk files were written under the directory, then truncated after their last read
    List<Path> files;
    try (var s = Files.list(dir)) {
      files = s.toList();
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    assertThat(files).hasSize(disk.plan().swapOuts().size());
    assertThat(files).allSatisfy(f -> assertThat(f.toFile().length()).isZero());
  }

  private List<Double> losses(GraphDef gd) {
    return TfTests.losses(gd, net.manifest());
  }

  /**
   * Grappler runs inside every session. The graph as executed (partition graphs) must still hold
   * every swap node and every trigger edge: with the dependency optimizer off (lms4j's config)
   * they all survive.
   */
  @Test
  void grapplerKeepsSwapNodesAndTriggerEdges() {
    LmsResult r = Lms.builder().params(params(Tier.HOST)).build().rewrite(net);
    GraphDef executed = executedGraph(r.graphDef(), SessionConfigs.lms());
    Map<String, NodeDef> n = nodes(executed);
    for (SwapPlan.SwapOut so : r.plan().swapOuts()) {
      assertThat(n).containsKey(so.name());
      for (SwapPlan.SwapIn si : so.swapIns()) {
        assertThat(n).containsKey(si.name());
        Set<String> ctl = n.get(si.name()).getInputList().stream()
            .filter(s -> s.startsWith("^")).map(s -> s.substring(1)).collect(Collectors.toSet());
        assertThat(ctl).as("triggers of " + si.name()).containsAll(si.triggers());
      }
    }
  }

  static GraphDef executedGraph(GraphDef gd, org.tensorflow.proto.ConfigProto cfg) {
    TrainingGraph tg = TinyNet.build(BATCH, 128, 6);
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      try (Session s = new Session(g, cfg)) {
        s.runner().addTarget("init").run();
        Session.Runner runner = s.runner();
        List<org.tensorflow.Tensor> feeds = new ArrayList<>();
        for (int i = 0; i < tg.manifest().feeds().size(); i++) {
          var t = dev.lms4j.tf.run.SyntheticFeeds.make(tg.manifest().feeds().get(i), i, 1, 1);
          feeds.add(t);
          runner.feed(tg.manifest().feeds().get(i).name(), t);
        }
        runner.addTarget("train_op").setOptions(RunOptions.newBuilder()
            .setOutputPartitionGraphs(true).build());
        try (Result res = runner.runAndFetchMetadata()) {
          GraphDef.Builder all = GraphDef.newBuilder();
          res.getMetadata().orElseThrow().getPartitionGraphsList()
              .forEach(p -> all.addAllNode(p.getNodeList()));
          return all.build();
        } finally {
          feeds.forEach(org.tensorflow.Tensor::close);
        }
      }
    }
  }

  @Test
  void sessionConfigTurnsTheDependencyOptimizerOff() {
    var cfg = SessionConfigs.lms();
    assertThat(cfg.getGraphOptions().getRewriteOptions().getDependencyOptimization())
        .isEqualTo(RewriterConfig.Toggle.OFF);
    assertThat(cfg.getInterOpParallelismThreads()).isEqualTo(-1);
  }
}
