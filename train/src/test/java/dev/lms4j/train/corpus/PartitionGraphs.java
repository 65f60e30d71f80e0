package dev.lms4j.train.corpus;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.SyntheticFeeds;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.RunOptions;

/** The graph TensorFlow runs after grappler, read from the partition graphs of one step. */
final class PartitionGraphs {
  private PartitionGraphs() {}

  /**
   * Runs init and one training step of {@code gd} (synthetic feeds, seed 42) under
   * {@code config} and returns the nodes TensorFlow ran, by name.
   */
  static Map<String, NodeDef> of(TrainingGraph tg, GraphDef gd, ConfigProto config) {
    Map<String, NodeDef> out = new TreeMap<>();
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      try (Session s = new Session(g, config)) {
        s.runner().addTarget(tg.manifest().init()).run();
        Session.Runner r = s.runner();
        List<Tensor> feeds = SyntheticFeeds.feed(r, tg.manifest(), 42, 1);
        r.fetch(tg.manifest().loss()).addTarget(tg.manifest().trainOp())
            .setOptions(RunOptions.newBuilder().setOutputPartitionGraphs(true).build());
        try (Result res = r.runAndFetchMetadata()) {
          for (GraphDef pg : res.getMetadata().orElseThrow().getPartitionGraphsList()) {
            for (NodeDef n : pg.getNodeList()) {
              out.put(n.getName(), n);
            }
          }
        } finally {
          feeds.forEach(Tensor::close);
        }
      }
    }
    return out;
  }
}
