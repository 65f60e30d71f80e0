package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * {@link OptimizerEdges} on a CNN trained with the framework's Adam ({@link AdamNet}): the
 * all-to-all control edges go, each update keeps its variable's reads before it, and the losses
 * stay bit-identical.
 */
class OptimizerEdgesTest {

  @Test
  void updatesWaitOnlyForTheirOwnVariablesReaders() {
    TrainingGraph tg = AdamNet.build(8, 16, 8, 32);
    Map<String, NodeDef> before = TfTests.nodes(tg.graphDef());
    List<String> gradients = controlInputs(before.get(applyAdamOf(before, "dense1_kernel")));
    // the framework's edges: every update op waits for the gradient of each of the 5 variables
    assertThat(gradients).hasSize(5).allMatch(n -> n.startsWith("gradients/"));

    OptimizerEdges.Result r = OptimizerEdges.relax(tg);
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    // 5 ApplyAdam ops and their 6 Casts each (beta powers, lr, betas, epsilon) lose 5 edges
    long relaxedOps = before.values().stream().filter(n -> !n.getName().startsWith("gradients/")
        && controlInputs(n).stream().anyMatch(c -> c.startsWith("gradients/"))).count();
    assertThat(relaxedOps).isEqualTo(5 * 7);
    assertThat(r.removedEdges()).isEqualTo(5 * 7 * 5);
    // what an update still waits for: only ops that read its own variable
    for (NodeDef n : after.values()) {
      if (n.getOp().equals("ApplyAdam")) {
        String variable = n.getInput(0);
        assertThat(controlInputs(n)).as(n.getName()).allMatch(c ->
            after.get(c).getInputList().contains(variable));
      }
    }
    // the update of dense1_kernel waits for the ops of the step that read the kernel: the
    // forward MatMul and the MatMul of the gradient flowing into the layer below
    NodeDef dense = after.get(applyAdamOf(before, "dense1_kernel"));
    List<String> gradientReaders = before.values().stream()
        .filter(n -> n.getInputList().contains("dense1_kernel")
            && n.getName().startsWith("gradients/") && n.getOp().equals("MatMul"))
        .map(NodeDef::getName).toList();
    assertThat(gradientReaders).hasSize(1);
    assertThat(controlInputs(dense)).containsAll(gradientReaders)
        .noneMatch(c -> gradients.contains(c));
    // the Casts that read beta1_power for the updates stay after its unordered Assign (the
    // original ran the Assign first: it waits for nothing, the Casts for every gradient)
    NodeDef betaAssign = before.values().stream().filter(n -> n.getOp().equals("Assign")
        && n.getInput(0).equals("beta1_power")
        && before.get(n.getInput(1)).getOp().equals("Mul")).findFirst().orElseThrow();
    List<NodeDef> castsOfPower = after.values().stream().filter(n -> n.getOp().equals("Cast")
        && n.getInput(0).equals("beta1_power")).toList();
    assertThat(castsOfPower).hasSize(5).allSatisfy(n ->
        assertThat(controlInputs(n)).containsExactly(betaAssign.getName()));

    assertThat(TfTests.losses(r.graphDef(), tg.manifest()))
        .containsExactlyElementsOf(TfTests.losses(tg.graphDef(), tg.manifest()));
  }

  @Test
  void otherOpsAfterTheGradientsKeepTheirEdges() {
    TrainingGraph tg = AdamNet.build(4, 8, 4, 8);
    String gradient = controlInputs(TfTests.nodes(tg.graphDef())
        .get(applyAdamOf(TfTests.nodes(tg.graphDef()), "conv1_kernel"))).get(0);
    // a check the user ordered after a gradient, fetched with the step: not an update, not read
    // by one, so its edge stays
    GraphDef gd = tg.graphDef().toBuilder().addNode(NodeDef.newBuilder().setName("check")
        .setOp("Identity").addInput("loss").addInput("^" + gradient)
        .putAttr("T", tg.graphDef().getNodeList().stream().filter(n -> n.getName().equals("loss"))
            .findFirst().orElseThrow().getAttrOrThrow("T"))).build();
    OptimizerEdges.Result r = OptimizerEdges.relax(gd, List.of("loss", "train_op", "check"),
        "gradients");
    assertThat(r.changes()).extracting(OptimizerEdges.Change::op).doesNotContain("check");
    assertThat(controlInputs(TfTests.nodes(r.graphDef()).get("check"))).containsExactly(gradient);
    assertThat(r.removedEdges()).isEqualTo(5 * 7 * 5);
  }

  @Test
  void aGraphWithoutSuchEdgesIsLeftAlone() {
    TrainingGraph tg = TinyNet.build(8, 16, 2);
    OptimizerEdges.Result r = OptimizerEdges.relax(tg);
    assertThat(r.changed()).isFalse();
    assertThat(r.graphDef()).isSameAs(tg.graphDef());
  }

  /**
   * The case that could change the math: a weight read through a {@code Reshape} (which shares
   * the ref variable's buffer) by a gradient op. {@code dh1 = dlogits x reshape(w2)^T} needs
   * {@code w2} before its update; the update's own inputs ({@code dw2 = h1^T x dlogits}) do not
   * depend on {@code dh1}, and the framework's edges (from {@code dw1}, which needs {@code dh1})
   * were what kept it after. Every op of the step that reads a variable's buffer, directly or
   * through an aliasing op, must stay an ancestor of that variable's update.
   */
  @Test
  void readersThroughAliasingOpsStayBeforeTheUpdate() {
    TrainingGraph tg = reshapedMlp(16, 32, 8);
    OptimizerEdges.Result r = OptimizerEdges.relax(tg);
    // 2 ApplyAdam ops and their 6 Casts each wait for the gradients of the 2 variables
    assertThat(r.removedEdges()).isEqualTo(2 * 7 * 2);
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    Map<String, NodeDef> before = TfTests.nodes(tg.graphDef());
    java.util.Set<String> step = ancestors(after, "train_op");
    step.addAll(ancestors(after, "loss"));
    int checked = 0;
    for (NodeDef update : after.values()) {
      if (!update.getOp().equals("ApplyAdam")) {
        continue;
      }
      String variable = update.getInput(0);
      for (NodeDef alias : after.values()) {
        if (!alias.getOp().equals("Reshape") || !alias.getInput(0).equals(variable)) {
          continue;
        }
        for (NodeDef reader : after.values()) {
          // readers a step runs (addGradients also built the unused gradient of the input x)
          if (reader.getInputList().contains(alias.getName()) && step.contains(reader.getName())
              && !reader.getName().equals(update.getName())) {
            // it ran before the update in the original graph (through the framework's edges,
            // or as a race the update lost), and must still
            assertThat(ancestors(after, update.getName())).as(reader.getName() + " before "
                + update.getName()).contains(reader.getName());
            checked++;
          }
        }
      }
    }
    // w1 (forward MatMul) and w2 (forward MatMul and the gradient MatMul into layer 1)
    assertThat(checked).isEqualTo(3);
    assertThat(r.addedEdges()).isPositive();
    assertThat(TfTests.losses(r.graphDef(), tg.manifest()))
        .containsExactlyElementsOf(TfTests.losses(tg.graphDef(), tg.manifest()));
  }

  /** Two dense layers whose kernels are flat variables reshaped at use, framework Adam. */
  private static TrainingGraph reshapedMlp(int batch, int in, int hidden) {
    try (org.tensorflow.Graph g = new org.tensorflow.Graph()) {
      org.tensorflow.op.Ops tf = org.tensorflow.op.Ops.create(g);
      var x = tf.withName("x").placeholder(org.tensorflow.types.TFloat32.class,
          org.tensorflow.op.core.Placeholder.shape(org.tensorflow.ndarray.Shape.of(batch, in)));
      var y = tf.withName("labels").placeholder(org.tensorflow.types.TFloat32.class,
          org.tensorflow.op.core.Placeholder.shape(org.tensorflow.ndarray.Shape.of(batch, 10)));
      var w1 = flatWeight(tf, "w1", in * hidden, 1);
      var w2 = flatWeight(tf, "w2", hidden * 10, 2);
      var h = tf.nn.relu(tf.linalg.matMul(x, tf.reshape(w1, tf.constant(new long[] {in,
          hidden}))));
      var logits = tf.linalg.matMul(h, tf.reshape(w2, tf.constant(new long[] {hidden, 10})));
      var loss = tf.withName("loss").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(logits, y).loss(), tf.constant(0));
      new org.tensorflow.framework.optimizers.Adam(g, 1e-2f).minimize(loss, "train_op");
      Manifest m = new Manifest(List.of(
          new Manifest.Feed("x", "float32", new long[] {batch, in}, "normal"),
          new Manifest.Feed("labels", "float32", new long[] {batch, 10}, "onehot")),
          "loss:0", "train_op", "Init");
      return new TrainingGraph(g.toGraphDef(), m);
    }
  }

  private static org.tensorflow.op.core.Variable<org.tensorflow.types.TFloat32> flatWeight(
      org.tensorflow.op.Ops tf, String name, long size, long seed) {
    org.tensorflow.op.Ops init = tf.withInitScope();
    var v = init.withName(name).variable(org.tensorflow.ndarray.Shape.of(size),
        org.tensorflow.types.TFloat32.class);
    init.assign(v, init.math.mul(init.random.truncatedNormal(init.constant(new long[] {size}),
        org.tensorflow.types.TFloat32.class,
        org.tensorflow.op.random.TruncatedNormal.seed(7L),
        org.tensorflow.op.random.TruncatedNormal.seed2(seed)), init.constant(0.3f)));
    return v;
  }

  /** Every op {@code name} depends on, through data and control inputs. */
  private static java.util.Set<String> ancestors(Map<String, NodeDef> nodes, String name) {
    java.util.Set<String> seen = new java.util.HashSet<>();
    java.util.Deque<String> work = new java.util.ArrayDeque<>();
    work.add(name);
    while (!work.isEmpty()) {
      for (String in : nodes.get(work.pop()).getInputList()) {
        String op = in.startsWith("^") ? in.substring(1) : in;
        int colon = op.lastIndexOf(':');
        op = colon < 0 ? op : op.substring(0, colon);
        if (seen.add(op)) {
          work.add(op);
        }
      }
    }
    return seen;
  }

  private static String applyAdamOf(Map<String, NodeDef> nodes, String variable) {
    return nodes.values().stream().filter(n -> n.getOp().equals("ApplyAdam")
        && n.getInput(0).equals(variable)).findFirst().orElseThrow().getName();
  }

  private static List<String> controlInputs(NodeDef n) {
    return n.getInputList().stream().filter(i -> i.startsWith("^")).map(i -> i.substring(1))
        .toList();
  }
}
