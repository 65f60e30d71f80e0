package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.LmsMode;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.GraphDef;

class ImportCacheTest {
  private static final String SCOPE = GraphImporter.DEFAULT_BACKWARD_SCOPE;
  private final TrainingGraph net = TinyNet.build(64, 256, 6);

  @BeforeEach
  void forget() {
    ImportCache.clear();
  }

  private DataflowGraph importNet(GraphDef gd, Map<String, long[]> shapes) {
    return GraphImporter.importGraph(gd, shapes, -1, SCOPE, net.manifest().runOps());
  }

  @Test
  void theSameGraphImportedAgainIsTheSameModel() throws Exception {
    Map<String, long[]> shapes = net.manifest().feedShapes();
    DataflowGraph first = importNet(net.graphDef(), shapes);
    assertThat(importNet(net.graphDef(), shapes)).isSameAs(first);
    // equal content, another object (as a rewrite before planning makes it again)
    GraphDef parsed = GraphDef.parseFrom(net.graphDef().toByteArray());
    assertThat(parsed).isNotSameAs(net.graphDef());
    assertThat(importNet(parsed, Map.of("x", shapes.get("x").clone(),
        "labels", shapes.get("labels").clone()))).isSameAs(first);
  }

  @Test
  void otherArgumentsOrAnotherGraphAreImportedAnew() {
    Map<String, long[]> shapes = net.manifest().feedShapes();
    DataflowGraph first = importNet(net.graphDef(), shapes);
    DataflowGraph batch32 = importNet(net.graphDef(),
        Map.of("x", new long[] {32, 32}, "labels", new long[] {32, 10}));
    assertThat(batch32).isNotSameAs(first);
    assertThat(batch32.op("layer0").orElseThrow().output(0).shape()).containsExactly(32, 256);
    assertThat(first.op("layer0").orElseThrow().output(0).shape()).containsExactly(64, 256);
    DataflowGraph everyOp = GraphImporter.importGraph(net.graphDef(), shapes, -1, SCOPE,
        java.util.Set.of());
    assertThat(everyOp).isNotSameAs(first);
    assertThat(everyOp.size()).isGreaterThan(first.size()); // init's ops too
    DataflowGraph wider = importNet(TinyNet.build(64, 512, 6).graphDef(), shapes);
    assertThat(wider.op("layer0").orElseThrow().output(0).shape()).containsExactly(64, 512);
  }

  @Test
  void theLeastRecentlyUsedGraphIsForgottenPastTheCapacity() {
    Map<String, long[]> shapes = net.manifest().feedShapes();
    DataflowGraph first = importNet(net.graphDef(), shapes);
    for (int width = 1; width <= ImportCache.CAPACITY; width++) {
      GraphDef other = TinyNet.build(64, 16 * width, 1).graphDef();
      GraphImporter.importGraph(other, shapes, -1, SCOPE, net.manifest().runOps());
    }
    long[] before = ImportCache.counts();
    DataflowGraph again = importNet(net.graphDef(), shapes);
    assertThat(again).isNotSameAs(first);
    assertThat(again.size()).isEqualTo(first.size());
    assertThat(ImportCache.counts()[1]).isGreaterThan(before[1]);
  }

  @Test
  void plansMadeOnAKeptGraphAreThoseOfAFreshImport() {
    // what the first rewrites derive from the kept graph (buffer owners, levelled peaks, the
    // recompute walk's peaks) must not change what a later one plans
    TrainingGraph big = TinyNet.build(512, 1024, 6);
    long peak = Lms.builder().budget(1L << 40).mode(LmsMode.AUTO).build().rewrite(big)
        .predictedPeakAfter();
    for (LmsMode mode : new LmsMode[] {LmsMode.AUTO, LmsMode.REMAT, LmsMode.TFLMS}) {
      for (double f : new double[] {0.9, 0.6}) {
        try {
          Lms.builder().budget((long) (peak * f)).mode(mode).build().rewrite(big);
        } catch (dev.lms4j.core.plan.PlanningException refused) {
          // a refusal derives from the graph too
        }
      }
    }
    long[] counts = ImportCache.counts();
    LmsResult kept = Lms.builder().budget((long) (peak * 0.7)).mode(LmsMode.AUTO).build()
        .rewrite(big);
    assertThat(ImportCache.counts()[0]).isGreaterThan(counts[0]);
    ImportCache.clear();
    LmsResult fresh = Lms.builder().budget((long) (peak * 0.7)).mode(LmsMode.AUTO).build()
        .rewrite(big);
    assertThat(kept.rewritten()).isTrue();
    assertThat(kept.graphDef().toByteString()).isEqualTo(fresh.graphDef().toByteString());
    assertThat(kept.predictedPeakAfter()).isEqualTo(fresh.predictedPeakAfter());
  }
}
