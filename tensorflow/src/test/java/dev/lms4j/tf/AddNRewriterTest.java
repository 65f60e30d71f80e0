package dev.lms4j.tf;

import static dev.lms4j.tf.TfTests.nodes;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.schedule.AddNChains;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.schedule.Schedulers;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.types.TFloat32;

class AddNRewriterTest {
  private static final int BATCH = 64;
  private static final int WIDTH = 128;
  private final TrainingGraph net = branchyNet();

  /**
   * x [64, 32] -> h = relu(x w0) [64, 128] -> four branches relu(h wi) -> sum = AddN(branches)
   * -> logits = sum w5 -> softmax loss. The gradient of h is {@code gradients/AddN} of the four
   * branches' input gradients: two AddNs of four 32 KiB inputs. Feeds as TinyNet's (x, labels),
   * so {@link SwapRewriterTest#executedGraph} runs it.
   */
  static TrainingGraph branchyNet() {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(BATCH, 32)));
      Placeholder<TFloat32> y = tf.withName("labels").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(BATCH, 10)));
      List<Variable<TFloat32>> vars = new ArrayList<>();
      List<Op> inits = new ArrayList<>();
      long[][] shapes = {{32, WIDTH}, {WIDTH, WIDTH}, {WIDTH, WIDTH}, {WIDTH, WIDTH},
          {WIDTH, WIDTH}, {WIDTH, 10}};
      for (int i = 0; i < shapes.length; i++) {
        Variable<TFloat32> w = tf.withName("w" + i).variable(Shape.of(shapes[i]), TFloat32.class);
        Operand<TFloat32> u = tf.random.randomUniform(tf.constant(shapes[i]), TFloat32.class,
            RandomUniform.seed(7L), RandomUniform.seed2((long) i + 1));
        inits.add(tf.assign(w, tf.math.mul(tf.math.sub(u, tf.constant(0.5f)),
            tf.constant((float) (2.0 / Math.sqrt(shapes[i][0]))))));
        vars.add(w);
      }
      Operand<TFloat32> h = tf.withName("h").nn.relu(tf.linalg.matMul(x, vars.get(0)));
      List<Operand<TFloat32>> branches = new ArrayList<>();
      for (int i = 1; i <= 4; i++) {
        branches.add(tf.withName("branch" + i).nn.relu(tf.linalg.matMul(h, vars.get(i))));
      }
      Operand<TFloat32> sum = tf.withName("sum").math.addN(branches);
      Operand<TFloat32> logits = tf.withName("logits").linalg.matMul(sum, vars.get(5));
      Operand<TFloat32> loss = tf.withName("loss").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(logits, y).loss(), tf.constant(0));
      Output<?>[] grads = g.addGradients("gradients", new Output<?>[] {loss.asOutput()},
          vars.stream().map(Variable::asOutput).toArray(Output<?>[]::new), null);
      List<Op> updates = new ArrayList<>();
      for (int i = 0; i < vars.size(); i++) {
        updates.add(tf.train.applyGradientDescent(vars.get(i), tf.constant(0.05f),
            grads[i].expect(TFloat32.class)));
      }
      tf.withControlDependencies(updates).withName("train_op").noOp();
      tf.withControlDependencies(inits).withName("init").noOp();
      Manifest m = new Manifest(List.of(
          new Manifest.Feed("x", "float32", new long[] {BATCH, 32}, "normal"),
          new Manifest.Feed("labels", "float32", new long[] {BATCH, 10}, "onehot")),
          "loss", "train_op", "init");
      return new TrainingGraph(g.toGraphDef(), m);
    }
  }

  private static DataflowGraph model(GraphDef gd) {
    return GraphImporter.importGraph(gd, Map.of(), -1, "gradients", Set.of("loss", "train_op"));
  }

  private List<Double> losses(GraphDef gd) {
    return TfTests.losses(gd, net.manifest());
  }

  /** Same losses up to float rounding: relative 1e-6 (adds in another order change last bits). */
  private static void assertSameUpToRounding(List<Double> actual, List<Double> expected) {
    assertThat(actual).hasSameSizeAs(expected);
    for (int i = 0; i < expected.size(); i++) {
      assertThat(Math.abs(actual.get(i) - expected.get(i)))
          .as("step %d: %s vs %s", i + 1, actual.get(i), expected.get(i))
          .isLessThanOrEqualTo(1e-6 * Math.abs(expected.get(i)));
    }
  }

  @Test
  void addNsBecomeChainsThatGrapplerKeeps() {
    DataflowGraph g = model(net.graphDef());
    List<AddNChains.Chain> chains = AddNChains.plan(g, Levels.of(g).schedule());
    assertThat(chains).extracting(AddNChains.Chain::op).containsExactly("sum", "gradients/AddN");
    // the branches all come at one level: input order
    assertThat(chains.get(0).inputs()).containsExactly("branch1:0", "branch2:0", "branch3:0",
        "branch4:0");
    GraphDef out = AddNRewriter.rewrite(net.graphDef(), chains);
    Map<String, NodeDef> n = nodes(out);
    NodeDef add1 = n.get("lms4j/addn/sum/add_1");
    NodeDef add2 = n.get("lms4j/addn/sum/add_2");
    NodeDef last = n.get("sum");
    assertThat(add1.getOp()).isEqualTo("AddV2");
    assertThat(add1.getInputList()).containsExactly("branch1", "branch2");
    assertThat(add2.getInputList()).containsExactly("lms4j/addn/sum/add_1", "branch3");
    assertThat(last.getOp()).isEqualTo("AddV2");
    assertThat(last.getInputList()).containsExactly("lms4j/addn/sum/add_2", "branch4");
    assertThat(last.getAttrOrThrow("T")).isEqualTo(nodes(net.graphDef()).get("sum")
        .getAttrOrThrow("T"));
    assertThat(last.containsAttr("N")).isFalse();
    for (NodeDef a : List.of(add1, add2, last)) {
      assertThat(a.getAttrOrThrow(AddNRewriter.ADD_OPS_REWRITE_TAG).getB()).isTrue();
    }
    assertThat(out.getNodeCount()).isEqualTo(net.graphDef().getNodeCount() + 4);
    try (Graph imported = new Graph()) {
      imported.importGraphDef(out);
    }
    // grappler leaves the chains as they are
    Map<String, NodeDef> executed = nodes(SwapRewriterTest.executedGraph(out,
        SessionConfigs.lms()));
    assertThat(executed.values()).noneMatch(x -> x.getOp().equals("AddN"));
    for (String name : List.of("sum", "lms4j/addn/sum/add_1", "lms4j/addn/sum/add_2",
        "gradients/AddN", "lms4j/addn/gradients/AddN/add_1")) {
      assertThat(executed.get(name).getOp()).as(name).isEqualTo("AddV2");
    }
    assertSameUpToRounding(losses(out), losses(net.graphDef()));
  }

  /**
   * Without the marker, grappler's arithmetic optimizer (AddOpsRewrite) folds each chain back
   * into one AddN: the marker is what keeps the rewrite.
   */
  @Test
  void withoutTheMarkerGrapplerFoldsTheChainBack() {
    DataflowGraph g = model(net.graphDef());
    GraphDef out = AddNRewriter.rewrite(net.graphDef(), AddNChains.plan(g,
        Levels.of(g).schedule()));
    GraphDef unmarked = out.toBuilder().clearNode().addAllNode(out.getNodeList().stream()
        .map(x -> x.toBuilder().removeAttr(AddNRewriter.ADD_OPS_REWRITE_TAG).build()).toList())
        .build();
    Map<String, NodeDef> executed = nodes(SwapRewriterTest.executedGraph(unmarked,
        SessionConfigs.lms()));
    assertThat(executed.values().stream().filter(x -> x.getOp().equals("AddN"))).hasSize(2);
    assertThat(executed).doesNotContainKey("lms4j/addn/sum/add_1");
  }

  /** Adding in the reverse order gives the same losses up to rounding (relative 1e-6). */
  @Test
  void anotherAdditionOrderAgreesUpToRounding() {
    DataflowGraph g = model(net.graphDef());
    List<AddNChains.Chain> reversed = new ArrayList<>();
    for (AddNChains.Chain c : AddNChains.plan(g, Levels.of(g).schedule())) {
      List<String> ins = new ArrayList<>(c.inputs());
      Collections.reverse(ins);
      reversed.add(new AddNChains.Chain(c.op(), ins));
    }
    GraphDef out = AddNRewriter.rewrite(net.graphDef(), reversed);
    assertThat(nodes(out).get("lms4j/addn/sum/add_1").getInputList())
        .containsExactly("branch4", "branch3");
    assertSameUpToRounding(losses(out), losses(net.graphDef()));
  }

  /**
   * The chains pay off once a schedule runs each add early. Simulated peaks (bytes):
   *
   * <pre>
   *                      levelled   list     (best)
   * AddN                 775,224    611,380
   * chains               775,224    578,616  (-5% on the list schedule, -25% on levelled)
   * </pre>
   *
   * (The AddN writes its sum into one of its inputs, the only reader of that branch's buffer,
   * as TensorFlow's kernel does: 32 KiB less than a sum in a buffer of its own; the fed batch
   * and labels live in host memory.)
   *
   * The levelled order computes the four 32 KiB branches (and their four input gradients) at one
   * level, so the chain cannot free anything earlier; the list scheduler finishes a branch and
   * adds it before starting the next. The list schedule of the chained graph is enforced with
   * control edges; losses agree to relative 1e-6.
   */
  @Test
  void chainsAndAScheduleLowerThePeak() {
    DataflowGraph before = model(net.graphDef());
    Schedulers.Choice b = Schedulers.best(before);
    assertThat(b.peaks().get(Schedulers.Kind.LEVELS)).isEqualTo(775_224);
    assertThat(b.peakBytes()).isEqualTo(611_380);

    GraphDef chained = AddNRewriter.rewrite(net.graphDef(), AddNChains.plan(before,
        Levels.of(before).schedule()));
    DataflowGraph after = model(chained);
    ScheduleRewriter.Result r = ScheduleRewriter.schedule(chained, after);
    assertThat(r.choice().peaks().get(Schedulers.Kind.LEVELS)).isEqualTo(775_224);
    assertThat(r.kind()).isEqualTo(Schedulers.Kind.LIST);
    assertThat(r.peakBytes()).isEqualTo(578_616);
    assertThat(r.edges()).isNotEmpty();

    Map<String, NodeDef> executed = nodes(SwapRewriterTest.executedGraph(r.graphDef(),
        SessionConfigs.lms()));
    assertThat(r.edges()).allSatisfy(e ->
        assertThat(executed.get(e.to()).getInputList()).contains("^" + e.from()));
    assertSameUpToRounding(losses(r.graphDef()), losses(net.graphDef()));
  }

  @Test
  void badChainsAreRefused() {
    GraphDef gd = net.graphDef();
    assertThatThrownBy(() -> AddNRewriter.rewrite(gd, List.of(new AddNChains.Chain("logits",
        List.of("sum", "w5", "sum"))))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("MatMul");
    assertThatThrownBy(() -> AddNRewriter.rewrite(gd, List.of(new AddNChains.Chain("sum",
        List.of("branch1:0", "branch2:0", "branch3:0", "h:0")))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("reads");
    assertThat(AddNRewriter.rewrite(gd, List.of())).isSameAs(gd);
  }
}
