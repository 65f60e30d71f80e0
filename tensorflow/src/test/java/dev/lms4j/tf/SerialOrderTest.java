package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.plan.LmsMode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * {@link SerialOrder}: the ops of a step form one chain in the levelled order, init still runs
 * on its own, and the losses are those of the unchained graph.
 */
class SerialOrderTest {

  @Test
  void theStepRunsAsOneChainInTheLevelledOrderWithTheSameLosses() {
    TrainingGraph tg = AdamNet.mlp(256, 64, 4);
    // an LMS-rewritten graph, as a data-parallel worker chains it: recomputes under a budget
    // below the unplanned peak (at the default memory ratio)
    long peak = Lms.builder().budget(1L << 30).mode(LmsMode.REMAT).build().rewrite(tg)
        .predictedPeakBefore();
    LmsResult lms = Lms.builder().budget(peak).mode(LmsMode.REMAT).build().rewrite(tg);
    assertThat(lms.memoryPlan().needed()).isTrue();
    GraphDef rewritten = lms.graphDef();
    SerialOrder.Result r = SerialOrder.enforce(rewritten, tg.manifest());
    assertThat(r.reason()).isNull();
    assertThat(r.addedEdges()).isPositive();

    DataflowGraph model = GraphImporter.importGraph(rewritten, tg.manifest().feedShapes(), -1,
        "gradients", tg.manifest().runOps());
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    List<String> chain = new ArrayList<>();
    for (int id : Levels.of(model).schedule()) {
      String name = model.op(id).name();
      if (!OpTypes.isResident(model.op(id).type()) && !name.equals("Init")) {
        chain.add(name);
      }
    }
    assertThat(r.chained()).isEqualTo(chain.size());
    // each op of the chain waits for the one before it (a control edge, or the data edge it had)
    for (int k = 1; k < chain.size(); k++) {
      String prev = chain.get(k - 1);
      assertThat(after.get(chain.get(k)).getInputList()).as(chain.get(k))
          .anyMatch(in -> in.equals("^" + prev) || in.equals(prev) || in.startsWith(prev + ":"));
    }
    // the init subgraph gets no edge from a step op, so init runs without the step's feeds
    assertThat(TfTests.losses(r.graphDef(), tg.manifest()))
        .containsExactlyElementsOf(TfTests.losses(rewritten, tg.manifest()))
        .containsExactlyElementsOf(TfTests.losses(tg.graphDef(), tg.manifest()));
  }

  @Test
  void aGraphWithControlFlowFramesIsLeftUnchained() {
    TrainingGraph tg = AdamNet.mlp(4, 8, 1);
    GraphDef gd = tg.graphDef().toBuilder().addNode(NodeDef.newBuilder().setName("loop/Enter")
        .setOp("Enter").addInput("loss")).build();
    SerialOrder.Result r = SerialOrder.enforce(gd, tg.manifest());
    assertThat(r.graphDef()).isSameAs(gd);
    assertThat(r.addedEdges()).isZero();
    assertThat(r.reason()).contains("control flow");
  }
}
