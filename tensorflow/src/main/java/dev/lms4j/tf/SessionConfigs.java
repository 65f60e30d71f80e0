package dev.lms4j.tf;

import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphOptions;
import org.tensorflow.proto.RewriterConfig;

/**
 * Session settings LMS needs.
 *
 * <p>Grappler's dependency optimizer removes or moves control edges it deems redundant; lms4j's
 * swap-ins are ordered by control edges (triggers), so it is turned off, as TFLMS did.
 * {@code inter_op_parallelism_threads = -1} runs every op in the caller's thread: one op at a
 * time and bit-identical losses between runs. Which of the ready ops runs first still follows
 * the graph grappler hands the executor, which varies between processes; {@link SerialOrder}
 * fixes it for the graphs lms4j rewrites.
 */
public final class SessionConfigs {
  private SessionConfigs() {}

  /** The config lms4j runs rewritten graphs with: deterministic order, dependency optimizer off. */
  public static ConfigProto lms() {
    return build(true, true, RewriterConfig.MemOptType.DEFAULT_MEM_OPT);
  }

  /**
   * A config.
   *
   * @param deterministic    run ops in the caller thread (inter-op threads -1)
   * @param keepControlEdges turn grappler's dependency optimizer off
   * @param memOpt           grappler's memory optimizer mode
   */
  public static ConfigProto build(boolean deterministic, boolean keepControlEdges,
      RewriterConfig.MemOptType memOpt) {
    RewriterConfig.Builder rw = RewriterConfig.newBuilder().setMemoryOptimization(memOpt);
    if (keepControlEdges) {
      rw.setDependencyOptimization(RewriterConfig.Toggle.OFF);
    }
    ConfigProto.Builder c = ConfigProto.newBuilder()
        .setGraphOptions(GraphOptions.newBuilder().setRewriteOptions(rw));
    if (deterministic) {
      c.setInterOpParallelismThreads(-1);
    }
    return c.build();
  }
}
