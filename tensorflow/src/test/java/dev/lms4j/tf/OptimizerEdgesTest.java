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

  private static String applyAdamOf(Map<String, NodeDef> nodes, String variable) {
    return nodes.values().stream().filter(n -> n.getOp().equals("ApplyAdam")
        && n.getInput(0).equals(variable)).findFirst().orElseThrow().getName();
  }

  private static List<String> controlInputs(NodeDef n) {
    return n.getInputList().stream().filter(i -> i.startsWith("^")).map(i -> i.substring(1))
        .toList();
  }
}
