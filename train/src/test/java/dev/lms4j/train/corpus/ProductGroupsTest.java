package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Reassociation;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.ProductGroups;
import dev.lms4j.tf.SerialOrder;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.StepLoop;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * The products lms4j writes as grappler groups them ({@code ProductGroups}) are the products
 * TensorFlow runs, read from its partition graphs, on the corpus encoder (attention scale and
 * layer norm gradients), and the graph written reaches the same losses bit for bit.
 */
class ProductGroupsTest {
  /** Three steps' losses, and per node TensorFlow ran: its op and its sorted data inputs. */
  private record Run(List<Double> losses, Map<String, String> executed) {}

  private static Run run(TrainingGraph tg, GraphDef gd) {
    List<Double> losses = new ArrayList<>();
    StepLoop.run(gd, tg.manifest(), SessionConfigs.lms(), 3, 42, rec -> losses.add(rec.loss()));
    Map<String, String> executed = new HashMap<>();
    PartitionGraphs.of(tg, gd, SessionConfigs.lms()).forEach((name, n) -> executed.put(name,
        n.getOp() + " " + n.getInputList().stream().filter(x -> !x.startsWith("^")).sorted()
            .toList()));
    return new Run(losses, executed);
  }

  @Test
  void theEncodersProductsAreWrittenAsGrapplerGroupsThemWithTheSameLosses() {
    TrainingGraph tg = Corpus.Family.ENCODER.build(Corpus.Size.SMALL, 42);
    Manifest m = tg.manifest();
    ProductGroups.Result r = ProductGroups.apply(tg.graphDef(), m.feedShapes(), m.runOps());
    // two layers: per layer the attention softmax's gradient, two layer norms' (d / n) * d
    assertThat(r.groups()).isGreaterThanOrEqualTo(6);
    assertThat(r.merged()).isPositive();
    Set<String> written = ProductGroups.tagged(r.graphDef());
    assertThat(written).hasSizeGreaterThanOrEqualTo(2 * r.groups()); // a root and an inner op

    Run given = run(tg, tg.graphDef());
    Run ours = run(tg, r.graphDef());
    assertThat(ours.losses()).containsExactlyElementsOf(given.losses());
    // what TensorFlow executes for each op written: the same op reading the same inputs as it
    // executes for the graph as given (grappler built those trees itself there)
    for (String op : written) {
      assertThat(ours.executed().get(op)).as(op).isNotNull()
          .isEqualTo(given.executed().get(op));
    }
    // and the grouping differs from the graph as given: grappler did regroup them
    Map<String, NodeDef> before = new HashMap<>();
    tg.graphDef().getNodeList().forEach(n -> before.put(n.getName(), n));
    assertThat(written).anySatisfy(op -> assertThat(given.executed().get(op))
        .isNotEqualTo(before.get(op).getOp() + " " + before.get(op).getInputList().stream()
            .filter(x -> !x.startsWith("^")).sorted().toList()));
    // written once: nothing is left to write
    assertThat(ProductGroups.apply(r.graphDef(), m.feedShapes(), m.runOps()).changed())
        .isFalse();
  }

  /**
   * The einsum encoder's attention follows a gather of the fed ids, whose shapes grappler's
   * shape inference does not know: the products the model would regroup without that knowledge
   * are the products TensorFlow runs as written, and with it the model groups none.
   */
  @Test
  void productsWhoseShapesGrapplerDoesNotKnowRunAsWritten() {
    TrainingGraph tg = Corpus.Family.ENCODER_EINSUM.build(Corpus.Size.SMALL, 42);
    Manifest m = tg.manifest();
    assertThat(ProductGroups.apply(tg.graphDef(), m.feedShapes(), m.runOps()).groups()).isZero();
    DataflowGraph blind = GraphImporter.importGraph(tg.graphDef(), m.feedShapes(), -1,
        "gradients", Set.of()).toBuilder().grapplerShapes(null).build();
    Set<String> preserve = new java.util.HashSet<>();
    m.runOps().forEach(o -> preserve.add(o.replaceAll(":.*", "")));
    List<Reassociation.Group> wouldBe = Reassociation.predict(blind, preserve).groups();
    assertThat(wouldBe).isNotEmpty();

    Run given = run(tg, tg.graphDef());
    Map<String, NodeDef> before = new HashMap<>();
    tg.graphDef().getNodeList().forEach(n -> before.put(n.getName(), n));
    int checked = 0;
    for (Reassociation.Group gr : wouldBe) {
      for (int member : gr.members()) {
        String op = blind.op(member).name();
        if (given.executed().containsKey(op)) {
          assertThat(given.executed().get(op)).as(op).isEqualTo(before.get(op).getOp() + " "
              + before.get(op).getInputList().stream().filter(x -> !x.startsWith("^"))
                  .sorted().toList());
          checked++;
        }
      }
    }
    assertThat(checked).isPositive();
  }

  @Test
  void theModelOfTheGraphAsGivenAlreadyHoldsTheGroupsAndTheWrittenGraphsModelIsTheSame() {
    TrainingGraph tg = Corpus.Family.ENCODER.build(Corpus.Size.SMALL, 42);
    Manifest m = tg.manifest();
    ProductGroups.Result r = ProductGroups.apply(tg.graphDef(), m.feedShapes(), m.runOps());
    DataflowGraph asGiven = GraphImporter.importGraph(tg.graphDef(), m.feedShapes(), -1,
        "gradients", m.runOps());
    DataflowGraph asWritten = GraphImporter.importGraph(r.graphDef(), m.feedShapes(), -1,
        "gradients", m.runOps());
    for (String op : ProductGroups.tagged(r.graphDef())) {
      List<String> a = asGiven.opOrThrow(op).inputs().stream().map(asGiven::tensorName)
          .sorted().toList();
      List<String> b = asWritten.opOrThrow(op).inputs().stream().map(asWritten::tensorName)
          .map(n -> n.startsWith("ConstantFolding/") ? reciprocalOf(r.graphDef(), n) : n)
          .sorted().toList();
      assertThat(b).as(op).isEqualTo(a);
    }
  }

  @Test
  void whereTheFetchedOpsAreNotKnownNothingIsWrittenOrGrouped() {
    TrainingGraph tg = Corpus.Family.ENCODER.build(Corpus.Size.SMALL, 42);
    Manifest m = tg.manifest();
    // a fetched op grouped into a tree would take another value: no fetches, no groups
    ProductGroups.Result none = ProductGroups.apply(tg.graphDef(), m.feedShapes(), Set.of());
    assertThat(none.changed()).isFalse();
    assertThat(none.graphDef()).isSameAs(tg.graphDef());
    ProductGroups.Result r = ProductGroups.apply(tg.graphDef(), m.feedShapes(), m.runOps());
    String op = ProductGroups.tagged(r.graphDef()).iterator().next();
    DataflowGraph unknown = GraphImporter.importGraph(tg.graphDef(), m.feedShapes(), -1,
        "gradients", Set.of());
    DataflowGraph known = GraphImporter.importGraph(tg.graphDef(), m.feedShapes(), -1,
        "gradients", m.runOps());
    List<String> asGiven = new ArrayList<>();
    tg.graphDef().getNodeList().stream().filter(n -> n.getName().equals(op)).findFirst()
        .orElseThrow().getInputList().forEach(in -> asGiven.add(in.contains(":") ? in
            : in + ":0"));
    assertThat(unknown.opOrThrow(op).inputs().stream().map(unknown::tensorName).toList())
        .isEqualTo(asGiven);
    assertThat(known.opOrThrow(op).inputs().stream().map(known::tensorName).toList())
        .isNotEqualTo(asGiven);
  }

  @Test
  void theSerialOrderWritesTheGroupsFirstAndLeavesTreesItDoesNotWriteOutOfTheChain() {
    TrainingGraph tg = Corpus.Family.ENCODER.build(Corpus.Size.SMALL, 42);
    Manifest m = tg.manifest();
    SerialOrder.Result r = SerialOrder.enforce(tg.graphDef(), m);
    assertThat(r.reason()).isNull();
    Set<String> written = ProductGroups.tagged(r.graphDef());
    assertThat(written).isEqualTo(ProductGroups.tagged(
        ProductGroups.apply(tg.graphDef(), m.feedShapes(), m.runOps()).graphDef()));
    Map<String, NodeDef> after = new HashMap<>();
    r.graphDef().getNodeList().forEach(n -> after.put(n.getName(), n));
    // written trees are chained (grappler's tag keeps them); tanh-GELU's cube, a tree lms4j
    // does not write, is not: a control edge would keep grappler from grouping it
    assertThat(written).allSatisfy(op -> assertThat(after.get(op).getInputList())
        .anyMatch(in -> in.startsWith("^")));
    DataflowGraph model = GraphImporter.importGraph(r.graphDef(), m.feedShapes(), -1,
        "gradients", m.runOps());
    List<String> cube = new ArrayList<>();
    Set<String> fetched = Set.copyOf(m.runOps().stream()
        .map(x -> x.replaceAll(":\\d+$", "")).toList());
    for (var g : Reassociation.predict(model, fetched, written).groups()) {
      assertThat(g.exact()).isFalse();
      g.members().forEach(v -> cube.add(model.op(v).name()));
    }
    assertThat(cube).isNotEmpty().allSatisfy(op -> assertThat(after.get(op).getInputList())
        .noneMatch(in -> in.startsWith("^")));
    // the trees ProductGroups reports as not written are those
    assertThat(ProductGroups.apply(tg.graphDef(), m.feedShapes(), m.runOps()).unwritten())
        .containsExactlyInAnyOrderElementsOf(cube);
  }

  /** The divisor a written reciprocal reads (the model of the graph as given reads it). */
  private static String reciprocalOf(GraphDef gd, String tensor) {
    String name = tensor.substring(0, tensor.lastIndexOf(':'));
    for (NodeDef n : gd.getNodeList()) {
      if (n.getName().equals(name)) {
        String in = n.getInput(0);
        return in.contains(":") ? in : in + ":0";
      }
    }
    throw new AssertionError("no reciprocal " + name);
  }
}
