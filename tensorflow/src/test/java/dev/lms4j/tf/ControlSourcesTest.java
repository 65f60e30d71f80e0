package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.NodeDef;

/** Control edges leave from the op behind an Identity, so grappler can still prune it. */
class ControlSourcesTest {

  @Test
  void anIdentityChainOfAComputedTensorStandsForItsProducer() {
    Map<String, NodeDef> g = graph(
        node("x", "Placeholder"),
        node("dy", "Relu", "x"),
        node("id1", "Identity", "dy"),
        node("id2", "Identity", "id1:0"));
    assertThat(ControlSources.of(g, "id2")).isEqualTo("dy");
    assertThat(ControlSources.of(g, "id1")).isEqualTo("dy");
    assertThat(ControlSources.of(g, "dy")).isEqualTo("dy");
  }

  @Test
  void identitiesThatOrderMoreOrReadASourceStay() {
    Map<String, NodeDef> g = graph(
        node("x", "Placeholder"),
        node("w", "VariableV2"),
        node("dy", "Relu", "x"),
        node("gated", "Identity", "dy", "^x"),
        node("read", "Identity", "w"),
        node("lms4j/swapin/a", "Identity", "dy"));
    assertThat(ControlSources.of(g, "gated")).isEqualTo("gated");
    assertThat(ControlSources.of(g, "read")).isEqualTo("read");
    assertThat(ControlSources.of(g, "lms4j/swapin/a")).isEqualTo("lms4j/swapin/a");
    assertThat(ControlSources.of(g, "missing")).isEqualTo("missing");
  }

  private static NodeDef node(String name, String op, String... inputs) {
    return NodeDef.newBuilder().setName(name).setOp(op).addAllInput(List.of(inputs)).build();
  }

  private static Map<String, NodeDef> graph(NodeDef... nodes) {
    Map<String, NodeDef> m = new HashMap<>();
    for (NodeDef n : nodes) {
      m.put(n.getName(), n);
    }
    return m;
  }
}
