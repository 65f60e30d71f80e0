package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.memory.BfcReplay;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Makes TensorFlow run a training step in exactly the order lms4j's simulator assumes (the
 * levelled schedule of {@link Levels}): a chain of control edges, each op of the step waiting
 * for the one before it.
 *
 * <p>Why: an LMS plan is checked by simulating the step in that order, and in a local session
 * that runs ops in the caller's thread the order holds closely enough. A gRPC worker does not:
 * an asynchronous op (a {@code CollectiveReduceV2} all-reduce) finishes on another thread, which
 * goes on running the ops it made ready while the worker's own thread runs others, so two ops
 * run at once and the plan's frees come late (measured: mlp 6 x 512, batch 1024, 2 workers at
 * 32 MiB with {@code --lms auto}, predicted 24.7 MiB: 2 of 3 runs ran out of memory, in a
 * recomputed ReLU and in a backward MatMul). Chained, the op after an all-reduce waits for it to
 * finish: the step runs one op at a time, in the simulated order, and gives up overlapping the
 * all-reduces with the backward pass.
 *
 * <pre>{@code
 * SerialOrder.Result r = SerialOrder.enforce(lmsResult.graphDef(), manifest);
 * }</pre>
 *
 * <p>Ops that are not chained: constants, feeds and variables (resident, no order to keep) and
 * the init subgraph's ops (a control edge from a step op into one would make {@code init} need
 * the step's feeds). Graphs with control flow frames ({@code Enter}) are returned unchanged:
 * an op inside a loop runs many times and cannot be placed once in a chain. The math is
 * unchanged (control edges only order); grappler must keep the edges, so run the result with
 * {@link SessionConfigs#lms()}.
 */
public final class SerialOrder {
  private static final Logger LOG = LoggerFactory.getLogger(SerialOrder.class);

  private SerialOrder() {}

  /**
   * The outcome of {@link #enforce}.
   *
   * @param graphDef   the graph with the chain (the input when nothing was chained)
   * @param addedEdges control edges added
   * @param chained    ops in the chain
   * @param reason     why nothing was chained, or null
   */
  public record Result(GraphDef graphDef, int addedEdges, int chained, String reason) {}

  /**
   * Chains the ops a step runs (the ancestors of the manifest's loss, train op and metrics) in
   * their levelled order.
   *
   * @param gd       the training graph (e.g. after LMS)
   * @param manifest its manifest: feed shapes, run ops, init op
   * @return the chained graph; {@code gd} is not changed
   */
  public static Result enforce(GraphDef gd, Manifest manifest) {
    Objects.requireNonNull(gd, "graph");
    Objects.requireNonNull(manifest, "manifest");
    for (NodeDef n : gd.getNodeList()) {
      if (n.getOp().equals("Enter") || n.getOp().equals("RefEnter")) {
        LOG.info("[LMS] serial order: the graph has control flow frames ({}); not chained",
            n.getName());
        return new Result(gd, 0, 0, "control flow frames");
      }
    }
    DataflowGraph model = GraphImporter.importGraph(gd, manifest.feedShapes(), -1, "gradients",
        manifest.runOps());
    Set<String> init = manifest.init() == null ? Set.of()
        : GraphImporter.ancestors(gd, Set.of(manifest.init()));
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    String prev = null;
    int added = 0;
    int chained = 0;
    for (int id : Levels.of(model).schedule()) {
      var op = model.op(id);
      // what init leaves held stands for an init op: never chained into the step
      if (OpTypes.isResident(op.type()) || BfcReplay.HELD.equals(op.type())
          || init.contains(op.name()) || !nodes.containsKey(op.name())) {
        continue;
      }
      chained++;
      if (prev != null) {
        NodeDef.Builder b = nodes.get(op.name());
        String edge = "^" + prev;
        if (!b.getInputList().contains(edge)) {
          b.addInput(edge);
          added++;
        }
      }
      prev = op.name();
    }
    GraphDef.Builder out = gd.toBuilder().clearNode();
    nodes.values().forEach(out::addNode);
    LOG.info("[LMS] serial order: {} ops of the step chained ({} control edges added)", chained,
        added);
    return new Result(out.build(), added, chained, null);
  }
}
