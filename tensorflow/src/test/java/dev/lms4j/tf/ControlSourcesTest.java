package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.NodeDef;

/**
 * A control edge leaves from the op behind a gradient Identity only where oneDNN needs that
 * Identity pruned to merge a filter gradient with its bias gradient.
 */
class ControlSourcesTest {

  @Test
  void anIdentityBetweenAFilterGradientAndItsBiasGradientStandsForItsProducer() {
    Map<String, NodeDef> g = graph(
        node("x", "Placeholder"),
        node("dy", "FusedBatchNormGradV3", "x"),
        node("id", "Identity", "dy"),
        node("sizes", "Const"),
        node("dw", "Conv2DBackpropFilter", "x", "sizes", "id"),
        node("db", "BiasAddGrad", "dy"));
    assertThat(ControlSources.of(g).source("id", Set.of())).isEqualTo("dy");
    assertThat(ControlSources.of(g).source("dw", Set.of())).isEqualTo("dw");
  }

  /** Where an input gradient reads the same Identity, the edge leaves from it (it runs later). */
  @Test
  void theInputGradientReadingTheIdentityStandsForItWhereThereIsOne() {
    Map<String, NodeDef> g = graph(
        node("x", "Placeholder"),
        node("w", "VariableV2"),
        node("dy", "FusedBatchNormGradV3", "x"),
        node("id", "Identity", "dy"),
        node("sizes", "Const"),
        node("dw", "Conv2DBackpropFilter", "x", "sizes", "id"),
        node("dx", "Conv2DBackpropInput", "sizes", "w", "id"),
        node("db", "BiasAddGrad", "dy"));
    assertThat(ControlSources.of(g).source("id", Set.of())).isEqualTo("dx");
  }

  /**
   * Where the input gradient reads what the edge gates (a recomputed or swapped-in filter), or
   * runs after a reader of it, it cannot stand in: the edge leaves from the op behind the
   * Identity. (remat-xla's plan on the corpus resnet-resource recomputed a weight's read for the
   * input gradient that stood in for the clone's trigger: TensorFlow refused the cycle.)
   */
  @Test
  void theInputGradientDoesNotStandInForAnEdgeIntoWhatItReads() {
    Map<String, NodeDef> g = graph(
        node("x", "Placeholder"),
        node("w", "VarHandleOp"),
        node("dy", "FusedBatchNormGradV3", "x"),
        node("id", "Identity", "dy"),
        node("sizes", "Const"),
        node("dw", "Conv2DBackpropFilter", "x", "sizes", "id"),
        node("wr", "ReadVariableOp", "w"),
        node("cast", "Cast", "wr"),
        node("dx", "Conv2DBackpropInput", "sizes", "cast", "id"),
        node("db", "BiasAddGrad", "dy"));
    ControlSources s = ControlSources.of(g);
    // an edge into a clone of wr that dx reads
    assertThat(s.source("id", Set.of("dx"))).isEqualTo("dy");
    // into a clone of what cast reads: dx runs after cast
    assertThat(s.source("id", Set.of("cast"))).isEqualTo("dy");
    // into something dx does not depend on
    assertThat(s.source("id", Set.of("dw"))).isEqualTo("dx");
  }

  /**
   * A bias gradient runs with the filter gradient oneDNN merges it into, so an input gradient
   * that waits (through a schedule's edge) on a reader of that bias gradient runs after the
   * filter gradient: it cannot stand in for an edge into what the filter gradient reads.
   * Measured on the corpus U-Net with the list scheduler's order and remat's plan at 28 MiB
   * (oneDNN on): the input gradient waited on the head's bias update, the merged op read the
   * recomputed activation, and TensorFlow skipped the cycle without an error (second loss 2.2975
   * instead of 1.4608).
   */
  @Test
  void theInputGradientDoesNotStandInWhenItWaitsOnTheMergedBiasGradient() {
    Map<String, NodeDef> g = graph(
        node("x", "Placeholder"),
        node("w", "VariableV2"),
        node("b", "VariableV2"),
        node("dy", "Reshape", "x"),
        node("id", "Identity", "dy"),
        node("sizes", "Const"),
        node("act", "Relu", "x"),
        node("dw", "Conv2DBackpropFilter", "act", "sizes", "id"),
        node("db", "BiasAddGrad", "dy"),
        node("b_update", "ApplyGradientDescent", "b", "x", "db"),
        // the schedule ordered the bias update before the input gradient
        node("dx", "Conv2DBackpropInput", "sizes", "w", "id", "^b_update"));
    ControlSources s = ControlSources.of(g);
    // an edge into a clone of act, which dw reads: dx runs after dw (merged with db)
    assertThat(s.source("id", Set.of("dw"))).isEqualTo("dy");
    // without the schedule's edge, dx stands in
    g.put("dx", node("dx", "Conv2DBackpropInput", "sizes", "w", "id"));
    assertThat(ControlSources.of(g).source("id", Set.of("dw"))).isEqualTo("dx");
  }

  @Test
  void otherIdentitiesStayTheSource() {
    Map<String, NodeDef> g = graph(
        node("x", "Placeholder"),
        node("w", "VariableV2"),
        node("dy", "Relu", "x"),
        node("sizes", "Const"),
        // read by a filter gradient, but no bias gradient reads dy
        node("id", "Identity", "dy"),
        node("dw", "Conv2DBackpropFilter", "x", "sizes", "id"),
        // a bias gradient reads dy2, but no filter gradient reads its Identity
        node("dy2", "Relu", "x"),
        node("id2", "Identity", "dy2"),
        node("m", "MatMul", "id2", "x"),
        node("db", "BiasAddGrad", "dy2"),
        // ordered by a control input of its own
        node("gated", "Identity", "dy", "^x"),
        node("dw2", "Conv2DBackpropFilter", "x", "sizes", "gated"),
        node("read", "Identity", "w"));
    ControlSources s = ControlSources.of(g);
    for (String n : List.of("id", "id2", "gated", "read", "missing")) {
      assertThat(s.source(n, Set.of())).as(n).isEqualTo(n);
    }
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
