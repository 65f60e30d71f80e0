package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.ScratchEstimates;

/**
 * Sizes of a graph, as the LMS log and the report give them.
 *
 * @param ops            number of ops
 * @param edges          data plus control edges
 * @param tensors        number of op outputs
 * @param parameterBytes bytes of persistent tensors (variables)
 * @param largestOp      op with the largest working set
 * @param largestOpBytes its working set
 * @param levels         levels of the topological sort
 */
public record GraphStats(int ops, int edges, int tensors, long parameterBytes, String largestOp,
    long largestOpBytes, int levels) {

  /** Computes the stats of a graph model. */
  public static GraphStats of(DataflowGraph g) {
    int tensors = g.ops().stream().mapToInt(o -> o.outputs().size()).sum();
    return new GraphStats(g.size(), g.edgeCount(), tensors, g.persistentBytes(),
        LowerBound.largestOpName(g), LowerBound.largestOp(g), Levels.of(g).count());
  }

  /** Logs the statistics as TFLMS did when it started editing a model; returns this. */
  GraphStats logged() {
    org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(Lms.class);
    log.info("[LMS][0] The graph has {} vertices and {} edges.", ops, edges);
    log.info("[LMS][0] The graph has {} MiB of learning parameters.",
        String.format("%.1f", parameterBytes / 1048576.0));
    log.info("[LMS][0] The largest operation is {} consuming {} MiB", largestOp,
        String.format("%.1f", largestOpBytes / 1048576.0));
    log.info("[LMS][0] Original categorized topological sort has {} levels.", levels);
    log.info("[LMS][0] Kernel scratch estimated for {} convolution kernels ({} threads, "
        + "L3 {} MiB)", ScratchEstimates.host().oneDnn() ? "oneDNN's" : "TensorFlow's own",
        ScratchEstimates.host().threads(), ScratchEstimates.host().l3Bytes() >> 20);
    return this;
  }
}
