package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.TensorPolicy;
import java.util.HashSet;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Where a graph's {@link TensorPolicy} comes from in TensorFlow terms: TFLMS's include/exclude
 * filters (in the parameters), the ops carrying {@code _recompute_hint}, the ops named to
 * recompute, and the inputs marked {@code _swap_to_host}.
 */
final class PolicySources {
  private static final Logger LOG = LoggerFactory.getLogger(PolicySources.class);

  private PolicySources() {}

  /**
   * The policy of {@code model}, imported from {@code gd}.
   *
   * @throws IllegalArgumentException when a named op is not in the graph or cannot be
   *                                  recomputed, or a marked input cannot be swapped
   */
  static TensorPolicy policy(GraphDef gd, DataflowGraph model, SwapParams params,
      Set<String> named) {
    Set<String> recompute = new TreeSet<>(RecomputeRewriter.hintedOps(gd));
    recompute.removeIf(h -> model.op(h).isEmpty());
    recompute.addAll(namedOps(gd, model, named));
    TensorPolicy.Spec spec = TensorPolicy.Spec.from(params).withRecompute(recompute)
        .withSwapToHost(GraphDefs.swapToHost(gd));
    return TensorPolicy.of(model, spec);
  }

  /**
   * The named ops that a step runs; a name that is no op of the graph is an error, one the step
   * does not run is skipped with a warning.
   */
  private static Set<String> namedOps(GraphDef gd, DataflowGraph model, Set<String> named) {
    Set<String> inGraph = new HashSet<>();
    for (NodeDef n : gd.getNodeList()) {
      inGraph.add(n.getName());
    }
    Set<String> out = new TreeSet<>();
    for (String name : named) {
      if (!inGraph.contains(name)) {
        throw new IllegalArgumentException("no op named '" + name + "' to recompute in the graph");
      }
      if (model.op(name).isEmpty()) {
        LOG.warn("[LMS][0] {} is not run by a training step; it is not recomputed", name);
      } else {
        out.add(name);
      }
    }
    return out;
  }
}
