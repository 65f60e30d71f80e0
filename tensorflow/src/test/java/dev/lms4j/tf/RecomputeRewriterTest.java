package dev.lms4j.tf;

import dev.lms4j.core.plan.LmsMode;
import static dev.lms4j.tf.TfTests.nodes;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.plan.RecomputePlan;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

class RecomputeRewriterTest {
  private final TrainingGraph net = TinyNet.build(64, 128, 4);

  private List<Double> losses(GraphDef gd) {
    return TfTests.losses(gd, net.manifest());
  }

  /** The net's GraphDef with the {@code _recompute_hint} attribute on op {@code name}. */
  private GraphDef withHint(String name) {
    return net.graphDef().toBuilder().clearNode().addAllNode(net.graphDef().getNodeList()
        .stream().map(x -> x.getName().equals(name) ? x.toBuilder()
            .putAttr(RecomputeRewriter.HINT_ATTR, AttrValue.newBuilder().setB(true).build())
            .build() : x).toList()).build();
  }

  @Test
  void heuristicClonesReluForTheBackwardPassWithIdenticalLosses() {
    LmsResult r = Lms.builder().mode(LmsMode.REMAT).build().rewrite(net);
    RecomputePlan plan = r.recompute();
    // each hidden ReLU's output is read by the MatMul gradient of the next layer
    assertThat(plan.groups()).extracting(g -> g.ops().get(0))
        .containsExactlyInAnyOrder("relu0", "relu1", "relu2", "relu3");
    Map<String, NodeDef> n = nodes(r.graphDef());
    for (RecomputePlan.Group g : plan.groups()) {
      String clone = RecomputePlan.cloneName(g.name(), g.ops().get(0));
      NodeDef c = n.get(clone);
      assertThat(c.getOp()).isEqualTo("Relu");
      assertThat(c.getInputList()).contains(n.get(g.ops().get(0)).getInput(0));
      assertThat(c.getInputList()).containsAll(g.triggers().stream().map(t -> "^" + t).toList());
      for (RecomputePlan.Repoint rp : g.repoints()) {
        assertThat(rp.consumer()).startsWith("gradients/");
        assertThat(n.get(rp.consumer()).getInputList()).contains(clone)
            .doesNotContain(rp.op());
      }
    }
    assertThat(losses(r.graphDef())).containsExactlyElementsOf(losses(net.graphDef()));
    // grappler keeps the clones in the graph as executed
    GraphDef executed = SwapRewriterTest.executedGraph(r.graphDef(), SessionConfigs.lms());
    assertThat(executed.getNodeList()).anyMatch(x -> x.getName().startsWith("lms4j/recompute/"));
  }

  @Test
  void recomputeHintSelectsOpsManually() {
    GraphDef hinted = withHint("relu1");
    LmsResult r = Lms.builder().mode(LmsMode.REMAT).build()
        .rewrite(new TrainingGraph(hinted, net.manifest()));
    assertThat(r.recompute().groups()).hasSize(1);
    assertThat(r.recompute().groups().get(0).ops()).containsExactly("relu1");
    assertThat(losses(r.graphDef())).containsExactlyElementsOf(losses(net.graphDef()));
  }

  @Test
  void aCloneReadingAVariableRunsBeforeItsUpdateButNotBeforeItsInitializer() {
    // layer1 = MatMul(relu0, w1): its clone reads w1 in the backward pass, where nothing else
    // orders it before ApplyGradientDescent(w1) (VariableReads)
    GraphDef hinted = withHint("layer1");
    LmsResult r = Lms.builder().mode(LmsMode.REMAT).build()
        .rewrite(new TrainingGraph(hinted, net.manifest()));
    RecomputePlan.Group gr = r.recompute().groups().get(0);
    assertThat(gr.ops()).containsExactly("layer1");
    String clone = "^" + RecomputePlan.cloneName(gr.name(), "layer1");
    List<NodeDef> writers = r.graphDef().getNodeList().stream()
        .filter(x -> x.getInputCount() > 0 && x.getInput(0).equals("w1")
            && (x.getOp().equals("ApplyGradientDescent") || x.getOp().equals("Assign")))
        .toList();
    assertThat(writers).extracting(NodeDef::getOp)
        .containsExactlyInAnyOrder("ApplyGradientDescent", "Assign");
    for (NodeDef w : writers) {
      if (w.getOp().equals("ApplyGradientDescent")) {
        assertThat(w.getInputList()).contains(clone);
      } else {
        // the initializer runs without the step's feeds: it must not wait for a clone
        assertThat(w.getInputList()).doesNotContain(clone);
      }
    }
    assertThat(losses(r.graphDef())).containsExactlyElementsOf(losses(net.graphDef()));
  }

  @Test
  void opsNamedThroughTheJavaApiAreRecomputedWithTheHintedOnes() {
    // relu0 carries the attribute, relu2 is named: two groups (a MatMul lies between them),
    // and nothing else is cloned even though the heuristic would also pick relu1 and relu3
    GraphDef hinted = withHint("relu0");
    LmsResult r = Lms.builder().mode(LmsMode.REMAT).recompute(Set.of("relu2"))
        .build().rewrite(new TrainingGraph(hinted, net.manifest()));
    assertThat(r.recompute().groups()).extracting(g -> g.ops())
        .containsExactlyInAnyOrder(List.of("relu0"), List.of("relu2"));
    Map<String, NodeDef> n = nodes(r.graphDef());
    RecomputePlan.Group g2 = r.recompute().groups().stream()
        .filter(g -> g.ops().equals(List.of("relu2"))).findFirst().orElseThrow();
    // relu2's reader in the backward pass now reads the clone
    assertThat(g2.repoints()).isNotEmpty();
    for (RecomputePlan.Repoint rp : g2.repoints()) {
      assertThat(n.get(rp.consumer()).getInputList())
          .contains(RecomputePlan.cloneName(g2.name(), "relu2")).doesNotContain("relu2");
    }
    assertThat(losses(r.graphDef())).containsExactlyElementsOf(losses(net.graphDef()));
    // the names alone, with a budget and an XLA remat mode: the named ops still decide
    LmsResult named = Lms.builder().mode(LmsMode.REMAT)
        .mode(LmsMode.REMAT_XLA).budget(1L << 30).recompute(Set.of("relu1"))
        .build().rewrite(net);
    assertThat(named.recompute().groups()).extracting(g -> g.ops())
        .containsExactly(List.of("relu1"));
  }

  @Test
  void namingAnOpThatCannotBeRecomputedIsAnError() {
    // x is fed; an unknown name is refused too
    assertThatThrownBy(() -> Lms.builder().mode(LmsMode.REMAT)
        .recompute(Set.of("x")).build().rewrite(net))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("x (Placeholder) "
            + "cannot be recomputed");
    assertThatThrownBy(() -> Lms.builder().mode(LmsMode.REMAT)
        .recompute(Set.of("no_such_op")).build().rewrite(net))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no op named 'no_such_op'");
  }

  @Test
  void namedOpsAreRecomputedInEveryMode() {
    // auto at a generous budget plans nothing of its own, and still recomputes the named op
    LmsResult auto = Lms.builder().mode(LmsMode.AUTO).budget(1L << 30)
        .recompute(Set.of("relu1")).build().rewrite(net);
    assertThat(auto.recompute().groups()).singleElement()
        .satisfies(g -> assertThat(g.ops()).containsExactly("relu1"));
    assertThat(auto.planner()).isEqualTo("manual-recompute");
    assertThat(auto.graphDef().getNodeList()).anyMatch(n -> n.getName().endsWith("/relu1"));
  }

  @Test
  void theBackwardScopeSaysWhichOpsReadRecomputedTensors() {
    // the same net with its gradients under grads/: with the default scope no op counts as
    // backward, so nothing is recomputed; naming the scope finds the same four ReLUs
    TrainingGraph other = TinyNet.build(64, 128, 4, "grads");
    LmsResult byDefault = Lms.builder().mode(LmsMode.REMAT).build().rewrite(other);
    assertThat(byDefault.recompute().groups()).isEmpty();
    LmsResult scoped = Lms.builder().mode(LmsMode.REMAT).backwardScope("grads")
        .build().rewrite(other);
    assertThat(scoped.recompute().groups()).extracting(g -> g.ops().get(0))
        .containsExactlyInAnyOrder("relu0", "relu1", "relu2", "relu3");
    for (RecomputePlan.Group g : scoped.recompute().groups()) {
      assertThat(g.repoints()).allMatch(rp -> rp.consumer().startsWith("grads/"));
    }
    assertThat(TfTests.losses(scoped.graphDef(), other.manifest()))
        .containsExactlyElementsOf(TfTests.losses(other.graphDef(), other.manifest()));
  }
}
