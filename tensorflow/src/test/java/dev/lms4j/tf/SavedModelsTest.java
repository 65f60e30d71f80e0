package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.tf.run.SyntheticFeeds;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.types.TFloat32;

class SavedModelsTest {
  @TempDir Path dir;
  private final TrainingGraph net = TinyNet.build(32, 64, 4);
  private final Lms lms = Lms.builder().params(SwapParams.builder().swapoutThreshold(2)
      .swapinAhead(1).swapinGroupby(0).build()).build();

  private static double step(Session s, Manifest m, int step) {
    List<Tensor> feeds = new ArrayList<>();
    try {
      Session.Runner r = s.runner();
      for (int i = 0; i < m.feeds().size(); i++) {
        Tensor t = SyntheticFeeds.make(m.feeds().get(i), i, 3, step);
        feeds.add(t);
        r.feed(m.feeds().get(i).name(), t);
      }
      try (Result res = r.fetch(m.loss()).addTarget(m.trainOp()).run()) {
        return ((TFloat32) res.get(0)).getFloat();
      }
    } finally {
      feeds.forEach(Tensor::close);
    }
  }

  /** Trains 2 steps, saves, trains 2 more: the losses a restored model must reproduce. */
  private double[] saveAfterTwoSteps(TrainingGraph tg, Path out) throws Exception {
    try (Graph g = new Graph()) {
      g.importGraphDef(tg.graphDef());
      try (Session s = new Session(g, SessionConfigs.lms())) {
        s.runner().addTarget("init").run();
        step(s, tg.manifest(), 1);
        step(s, tg.manifest(), 2);
        SavedModels.save(s, g, tg.manifest(), out);
        return new double[] {step(s, tg.manifest(), 3), step(s, tg.manifest(), 4)};
      }
    }
  }

  @Test
  void aModelSavedAfterLmsKeepsItsSwapNodesAndResumes() throws Exception {
    LmsResult r = lms.rewrite(net);
    TrainingGraph rewritten = new TrainingGraph(r.graphDef(), net.manifest());
    Path out = dir.resolve("lms");
    double[] expected = saveAfterTwoSteps(rewritten, out);
    assertThat(GraphDefs.readAny(out, SavedModels.TAG).getNodeList())
        .anyMatch(n -> n.getName().startsWith("lms4j/swapout/"));
    try (SavedModels.Loaded m = SavedModels.load(out, null)) {
      assertThat(m.graph().operation(r.plan().swapOuts().get(0).name())).isNotNull();
      assertThat(new double[] {step(m.session(), m.manifest(), 3),
          step(m.session(), m.manifest(), 4)}).containsExactly(expected);
    }
  }

  @Test
  void lmsCanBeAppliedWhenLoading() throws Exception {
    Path out = dir.resolve("plain");
    double[] expected = saveAfterTwoSteps(net, out);
    assertThat(GraphDefs.readAny(out, SavedModels.TAG).getNodeList())
        .noneMatch(n -> n.getName().startsWith("lms4j/"));
    try (SavedModels.Loaded m = SavedModels.load(out, lms)) {
      assertThat(m.lms().rewritten()).isTrue();
      assertThat(m.graph().operation(m.lms().plan().swapOuts().get(0).name())).isNotNull();
      assertThat(new double[] {step(m.session(), m.manifest(), 3),
          step(m.session(), m.manifest(), 4)}).containsExactly(expected);
    }
  }
}
