package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.BfcReplay;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.GraphDef;

/**
 * What a graph's init run alone needs of TensorFlow's allocator ({@link BfcReplay#initNeed}):
 * the floor a graph whose initializers hold large temporaries (the corpus init-heavy: two
 * table-sized draws alive at once) sets below every plan of its step, which the step's replay
 * does not see. The init run is the ops the manifest's init op needs; what grappler folds out
 * of it into held constants (computations of constants and of variables' static shapes) is
 * {@link InitHeldConstants#folded}.
 *
 * <pre>{@code
 * BfcReplay.InitNeed need = InitNeeds.of(tg.graphDef(), tg.manifest(), -1, "gradients");
 * }</pre>
 */
public final class InitNeeds {
  private static final Logger LOG = LoggerFactory.getLogger(InitNeeds.class);
  /** The largest limit tried, MiB: 64 GiB. */
  public static final long MAX_MIB = 64L << 10;

  private InitNeeds() {}

  /**
   * The init run's need, or null where the manifest names no init op or its graph cannot be
   * imported on its own.
   *
   * @param gd            the graph
   * @param m             its manifest (the init op, the feeds, the ops a step runs)
   * @param batchSize     the batch size for unknown first dimensions, or -1
   * @param backwardScope the gradient ops' name scope
   */
  public static BfcReplay.InitNeed of(GraphDef gd, Manifest m, int batchSize,
      String backwardScope) {
    if (m.init() == null) {
      return null;
    }
    try {
      DataflowGraph init = GraphImporter.importGraph(gd, m.feedShapes(), batchSize,
          backwardScope, Set.of(m.init()));
      return BfcReplay.initNeed(init, MAX_MIB, InitHeldConstants.folded(gd.getNodeList()));
    } catch (IllegalArgumentException e) {
      LOG.info("[LMS][0] Init's own need not estimated: {}", e.getMessage());
      return null;
    }
  }
}
