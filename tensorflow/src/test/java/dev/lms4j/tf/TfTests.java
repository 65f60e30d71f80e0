package dev.lms4j.tf;

import dev.lms4j.tf.run.StepLoop;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/** Helpers the rewriter tests share. */
final class TfTests {
  private TfTests() {}

  /** The graph's nodes by name. */
  static Map<String, NodeDef> nodes(GraphDef gd) {
    Map<String, NodeDef> m = new HashMap<>();
    gd.getNodeList().forEach(n -> m.put(n.getName(), n));
    return m;
  }

  /** The losses of 3 steps of {@code gd} in this process (seed 1, lms4j's session config). */
  static List<Double> losses(GraphDef gd, Manifest m) {
    List<Double> l = new ArrayList<>();
    StepLoop.run(gd, m, SessionConfigs.lms(), 3, 1, r -> l.add(r.loss()));
    return l;
  }
}
