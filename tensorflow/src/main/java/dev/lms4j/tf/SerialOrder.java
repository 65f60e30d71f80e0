package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.memory.BfcReplay;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
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
 * <p>The init subgraph gets a chain of its own: its ops that the step does not run, in the
 * graph's order (the order the variables were created in). Without both chains TensorFlow's
 * order is not fixed even in the caller's thread: the executor takes ready ops in the order of
 * the graph grappler hands it, which varies from process to process, and so do where tensors
 * land in the BFC allocator and the smallest budget that trains. Measured on the corpus U-Net
 * (tflms plan for 17 MiB, bench size): unchained, the same graph trained 4 times of 5 at 16
 * MiB and ran out of memory once, and its traced peak varied between 13.1 and 16.0 MiB; with
 * the step chained only, it still varied; with both chains, 4 runs at each of 15, 16 and 17
 * MiB traced the same steps and peaks and all trained. On the corpus DenseNet (tflms plan for
 * 44 MiB) both chains made the boundary exact: out of memory at 43 MiB in 2 of 2 runs, trains
 * at 44 in 2 of 2, where unchained it trained at 44 in one run and ran out of memory at 44 in
 * another.
 *
 * <p>Ops that are not chained: constants, feeds and variables (resident, no order to keep), the
 * init computations TensorFlow folds into constants before init runs ({@link
 * InitHeldConstants#folded}: chained, the two equal slot fills of a variable would each hold a
 * constant where TensorFlow merges them into one; measured on the framework-Adam MLP of
 * AdamUnderBudgetTest: 16 of its 1 MiB fills held with init chained, 8 unchained), the
 * init subgraph's ops in the step's chain (a control edge from a step op into one would make
 * {@code init} need the step's feeds), and ops both run in the init chain (a control edge into
 * one would make the step run init). Graphs with control flow frames ({@code Enter}) are
 * returned unchanged:
 * an op inside a loop runs many times and cannot be placed once in a chain. The math is
 * unchanged (control edges only order); grappler must keep the edges, so run the result with
 * {@link SessionConfigs#lms()}.
 *
 * <p>Grappler groups a tree of products only where its ops have no control edges in or out
 * ({@link dev.lms4j.core.graph.Reassociation}). The products lms4j predicts exactly are written
 * first, as grappler groups them and with its tag ({@link ProductGroups}), so the chain follows
 * the products TensorFlow runs; the trees not written ({@link ProductGroups.Result#unwritten},
 * e.g. tanh-GELU's cube) are left out of the chain, so grappler still groups them as it does for
 * the graph as given.
 *
 * <p>Likewise the ops TensorFlow fuses or removes only where no control edge holds them
 * ({@link UnchainedOps}: a convolution and its bias add, a filter gradient and the bias gradient
 * oneDNN merges into it, identities, reshapes, shapes) are left out of the chain, so it runs the
 * same kernels as the graph as given and reaches its losses bit for bit (before, the corpus
 * DenseNet's second loss moved by 1 ulp with oneDNN on). An op that reads a ref variable stays
 * in the chain unless it is an ancestor of the variable's update. A bias gradient oneDNN merges
 * into a filter gradient, and what reads it, is ordered after that op: the model has the edge
 * ({@link GraphImporter}), so the chain makes no cycle through the merged op.
 */
public final class SerialOrder {
  private static final Logger LOG = LoggerFactory.getLogger(SerialOrder.class);

  private SerialOrder() {}

  /**
   * The outcome of {@link #enforce}.
   *
   * @param graphDef   the graph with the chain (the input when nothing was chained)
   * @param addedEdges control edges added
   * @param chained     ops in the step's chain
   * @param initChained ops in the init op's chain
   * @param reason      why nothing was chained, or null
   */
  public record Result(GraphDef graphDef, int addedEdges, int chained, int initChained,
      String reason) {}

  /**
   * Chains the ops a step runs (the ancestors of the manifest's loss, train op and metrics) in
   * their levelled order.
   *
   * @param gd       the training graph (e.g. after LMS)
   * @param manifest its manifest: feed shapes, run ops, init op
   * @return the chained graph; {@code gd} is not changed
   */
  public static Result enforce(GraphDef gd, Manifest manifest) {
    return enforce(gd, manifest, null);
  }

  /**
   * As above, chaining the step in {@code order} (op names; null: the levelled order of the
   * graph as written): the order the plan was simulated and replayed in, the planner's model
   * with the plan applied. The levelled order of the rewritten graph as written can differ from
   * it (its swap-ins and updates level differently): traced on the corpus U-Net's tflms plan at
   * half its peak, 12 weight updates ran ahead of a swap-in that the model ran before them.
   * Ops the order does not name (what the commit added beyond the model's ops) follow their
   * last input; where the graph's edges disagree with the order, the edges win.
   */
  public static Result enforce(GraphDef gd, Manifest manifest, List<String> order) {
    Objects.requireNonNull(gd, "graph");
    Objects.requireNonNull(manifest, "manifest");
    for (NodeDef n : gd.getNodeList()) {
      if (n.getOp().equals("Enter") || n.getOp().equals("RefEnter")) {
        LOG.info("[LMS] serial order: the graph has control flow frames ({}); not chained",
            n.getName());
        return new Result(gd, 0, 0, 0, "control flow frames");
      }
    }
    // products as grappler groups them, written first: a control edge into or out of a product
    // keeps grappler from grouping it, which would change its rounding
    ProductGroups.Result groups = ProductGroups.apply(gd, manifest.feedShapes(),
        manifest.runOps());
    gd = groups.graphDef();
    // the GraphDef's own products: the chain must match them
    DataflowGraph model = GraphImporter.importAsWritten(gd, manifest.feedShapes(), -1,
        "gradients", manifest.runOps());
    Set<String> step = manifest.runOps().isEmpty() ? Set.of()
        : GraphImporter.ancestors(gd, manifest.runOps());
    Set<String> unchained = unchained(gd, groups.unwritten(), step);
    Set<String> init = manifest.init() == null ? Set.of()
        : GraphImporter.ancestors(gd, Set.of(manifest.init()));
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    String prev = null;
    int added = 0;
    int chained = 0;
    int[] chainOrder = order == null ? Levels.of(model).schedule() : following(model, order);
    Set<String> inChain = new HashSet<>();
    for (int id : chainOrder) {
      var op = model.op(id);
      // what init leaves held stands for an init op: never chained into the step
      if (OpTypes.isResident(op.type()) || BfcReplay.HELD.equals(op.type())
          || init.contains(op.name()) || !nodes.containsKey(op.name())
          || unchained.contains(op.name())) {
        continue;
      }
      chained++;
      inChain.add(op.name());
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
    int pins = pin(model, chainOrder, StepOrder.of(gd, unchained), step, inChain, nodes);
    added += pins;
    int initChained = 0;
    if (manifest.init() != null && nodes.containsKey(manifest.init())
        && !manifest.runOps().isEmpty()) {
      prev = null;
      // what TensorFlow folds before init runs (InitHeldConstants holds the same, a Fill above
      // 10 MiB included: grappler folds those; one rewired by InitConstants reads a
      // PlaceholderWithDefault and is not among them), and every init computation the model
      // merges with a twin: chained, twins would not be merged
      Set<String> folded = new HashSet<>(InitHeldConstants.folded(gd.getNodeList()));
      folded.addAll(InitHeldConstants.merged(gd.getNodeList(), step));
      for (String name : initOrder(nodes, init)) {
        NodeDef.Builder b = nodes.get(name);
        if (step.contains(name) || OpTypes.isResident(b.getOp())
            || name.equals(manifest.init()) || folded.contains(name)) {
          continue;
        }
        initChained++;
        if (prev != null) {
          String edge = "^" + prev;
          if (!b.getInputList().contains(edge)) {
            b.addInput(edge);
            added++;
          }
        }
        prev = name;
      }
    }
    GraphDef.Builder out = gd.toBuilder().clearNode();
    nodes.values().forEach(out::addNode);
    LOG.info("[LMS] serial order: {} ops of the step and {} of init chained ({} control edges "
        + "added, {} of them pinning a merged filter gradient ahead of the chain)", chained,
        initChained, added, pins);
    return new Result(out.build(), added, chained, initChained, null);
  }

  /**
   * Gives the chain's op that runs after each pinned op ({@link StepOrder#pinned}: a filter
   * gradient oneDNN merges with its bias gradient, left out of the chain) a control edge from
   * it, so that TensorFlow runs it ahead of that op in every process. Left out of the chain, it
   * runs as soon as its inputs are there; where the chain's next op becomes ready with it,
   * TensorFlow took either first, differently from process to process (the corpus DenseNet's
   * tflms plan for 65 MiB: traced twice, the filter gradient ran first once and after the input
   * gradient once; the allocator model needs 58 and 70 MiB for the two orders). A control edge
   * out of the filter gradient does not keep oneDNN from merging it (its rule asks for the same
   * control inputs on both ops), and the edge follows the order the step runs in, so it closes
   * no cycle.
   *
   * @return the control edges added
   */
  private static int pin(DataflowGraph model, int[] chainOrder, StepOrder steps,
      Set<String> step, Set<String> inChain, Map<String, NodeDef.Builder> nodes) {
    if (steps.pinned().isEmpty()) {
      return 0;
    }
    int added = 0;
    List<String> waiting = new ArrayList<>();
    for (int v : steps.orders(model, chainOrder).get(0)) {
      String name = model.op(v).name();
      if (steps.pinned().contains(name) && step.contains(name)) {
        waiting.add(name);
      } else if (inChain.contains(name) && !waiting.isEmpty()) {
        NodeDef.Builder b = nodes.get(name);
        for (String f : waiting) {
          if (!b.getInputList().contains("^" + f)) {
            b.addInput("^" + f);
            added++;
          }
        }
        waiting.clear();
      }
    }
    return added;
  }

  /**
   * A topological order of {@code model} that runs the ops {@code order} names in its order and
   * every other op right after its last input.
   */
  static int[] following(DataflowGraph model, List<String> order) {
    Map<String, Integer> pos = new java.util.HashMap<>();
    for (int i = 0; i < order.size(); i++) {
      pos.putIfAbsent(order.get(i), i);
    }
    long[] prio = new long[model.size()];
    for (int v : model.topologicalOrder()) {
      Integer p = pos.get(model.op(v).name());
      if (p != null) {
        prio[v] = 2L * p;
      } else {
        long after = -1;
        for (int u : model.predecessors(v)) {
          after = Math.max(after, prio[u]);
        }
        prio[v] = after + 1;
      }
    }
    return model.topologicalOrder(java.util.Comparator.<Integer>comparingLong(v -> prio[v])
        .thenComparing(java.util.Comparator.naturalOrder()));
  }

  /**
   * The ops {@link #enforce} leaves out of the chain of {@code gd} (a graph as lms4j rewrites
   * it, before or after the chain).
   *
   * @param gd         the graph
   * @param feedShapes its feeds' shapes
   * @param runOps     what a step runs
   */
  static Set<String> unchained(GraphDef gd, Map<String, long[]> feedShapes, Set<String> runOps) {
    ProductGroups.Result groups = ProductGroups.apply(gd, feedShapes, runOps);
    GraphDef written = groups.graphDef();
    return unchained(written, groups.unwritten(),
        runOps.isEmpty() ? Set.of() : GraphImporter.ancestors(written, runOps));
  }

  /**
   * As above, on {@code gd} with its products written: the trees grappler groups that were not
   * ({@code unwritten}), and what {@link UnchainedOps} names among the ops of {@code step}.
   */
  private static Set<String> unchained(GraphDef gd, Set<String> unwritten, Set<String> step) {
    // the trees grappler groups that were not written are left out of the chain, so grappler
    // still groups them as it does for the graph as given
    Set<String> unchained = new HashSet<>(unwritten);
    // a control edge on an op TensorFlow fuses keeps it from fusing, which changes its rounding
    unchained.addAll(UnchainedOps.of(gd, step));
    return unchained;
  }

  /**
   * The init op's ancestors in the graph's own order, each op's inputs pulled before it where
   * the graph lists them later: in a graph built in creation order (as TF Java and Python write
   * them) that is the order the variables were created in, the order {@code BfcReplay} lays the
   * variables out in. (Measured on the corpus U-Net's tflms plan for 17 MiB: this order trained
   * at 15 MiB, where a depth-first walk from the init op, in its input order, needed 18.)
   */
  private static List<String> initOrder(Map<String, NodeDef.Builder> nodes, Set<String> init) {
    List<String> order = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    Deque<String> stack = new ArrayDeque<>();
    Deque<Integer> next = new ArrayDeque<>();
    for (String root : nodes.keySet()) {
      if (!init.contains(root) || !seen.add(root)) {
        continue;
      }
      stack.push(root);
      next.push(0);
      while (!stack.isEmpty()) {
        NodeDef.Builder n = nodes.get(stack.peek());
        int i = next.pop();
        if (i < n.getInputCount()) {
          next.push(i + 1);
          String src = GraphImporter.opName(n.getInput(i));
          if (init.contains(src) && seen.add(src)) {
            stack.push(src);
            next.push(0);
          }
        } else {
          order.add(stack.pop());
        }
      }
    }
    return order;
  }
}
