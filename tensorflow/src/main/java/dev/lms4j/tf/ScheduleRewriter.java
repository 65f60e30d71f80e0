package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.schedule.ScheduleEdges;
import dev.lms4j.core.schedule.Schedulers;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
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
 * Makes TensorFlow run a memory-minimising schedule: adds the control edges
 * {@link ScheduleEdges} chose to a GraphDef, as {@code ^from} inputs of the waiting op.
 *
 * <pre>{@code
 * DataflowGraph model = GraphImporter.importGraph(gd, feedShapes, -1, "gradients",
 *     Set.of("loss", "train_op"));
 * ScheduleRewriter.Result r = ScheduleRewriter.schedule(gd, model);
 * try (Graph g = new Graph()) {
 *   g.importGraphDef(r.graphDef());
 *   try (Session s = new Session(g, SessionConfigs.lms())) { ... }
 * }
 * }</pre>
 *
 * Run the result with {@link SessionConfigs#lms()}: grappler's dependency optimizer may remove
 * control edges it finds redundant. Grappler keeps the edges otherwise, but moves an edge to a
 * node's input when it removes the node (a {@code Reshape} that changes nothing), and does not
 * fuse an op that has a control edge with its neighbours (oneDNN's {@code Conv2DBackpropFilter +
 * BiasAddGrad} on the zoo's resnet): the losses then agree to within 1e-6 relative (3.6e-7
 * there) instead of bit for bit. The rewrite is pure: the input GraphDef is not changed.
 */
public final class ScheduleRewriter {
  private static final Logger LOG = LoggerFactory.getLogger(ScheduleRewriter.class);

  private ScheduleRewriter() {}

  /**
   * Gain below which {@link #schedule(GraphDef, DataflowGraph)} keeps the levelled order: 2% of
   * the levelled schedule's simulated peak, the simulator's error against measured peaks without
   * LMS. (On the zoo's resnet the best schedule saves 0.4%, less than the measured peak varies
   * between runs, while its edges block some of oneDNN's fusions.)
   */
  public static final double MIN_GAIN = 0.02;

  /**
   * The outcome of {@link #schedule}.
   *
   * @param graphDef  the GraphDef with the control edges (the input when none are needed)
   * @param kind      the schedule enforced: the best one, or {@link Schedulers.Kind#LEVELS} when
   *                  it does not save enough
   * @param peakBytes the simulated peak of that schedule
   * @param choice    every scheduler's simulated peak
   * @param edges     the control edges added
   */
  public record Result(GraphDef graphDef, Schedulers.Kind kind, long peakBytes,
      Schedulers.Choice choice, List<ScheduleEdges.Edge> edges) {
    /** Copies the list. */
    public Result {
      Objects.requireNonNull(graphDef);
      Objects.requireNonNull(kind);
      Objects.requireNonNull(choice);
      edges = List.copyOf(edges);
    }
  }

  /** {@link #schedule(GraphDef, DataflowGraph, double)} with {@link #MIN_GAIN}. */
  public static Result schedule(GraphDef gd, DataflowGraph model) {
    return schedule(gd, model, MIN_GAIN);
  }

  /**
   * Picks the schedule with the lowest simulated peak for {@code model} ({@link
   * Schedulers#best}) and adds the {@link ScheduleEdges.Mode#STRICT} edges that enforce it. When
   * it is the levelled schedule, or lowers the levelled peak by less than {@code minGain}, the
   * GraphDef is returned unchanged: TensorFlow already runs (about) the levelled order.
   *
   * @param gd      the graph
   * @param model   its graph model ({@link GraphImporter}), usually restricted to the ops a step
   *                runs
   * @param minGain the smallest fraction of the levelled peak worth enforcing, in [0, 1)
   */
  public static Result schedule(GraphDef gd, DataflowGraph model, double minGain) {
    if (!(minGain >= 0 && minGain < 1)) {
      throw new IllegalArgumentException("minGain must be in [0, 1): " + minGain);
    }
    Schedulers.Choice c = Schedulers.best(model);
    long levelled = c.peaks().get(Schedulers.Kind.LEVELS);
    if (c.kind() == Schedulers.Kind.LEVELS || c.peakBytes() > levelled * (1 - minGain)) {
      LOG.info("[LMS][0] Schedule: levelled (simulated peak {} MiB; {} would give {} MiB), "
          + "no control edges", mib(levelled), c.kind(), mib(c.peakBytes()));
      return new Result(gd, Schedulers.Kind.LEVELS, levelled, c, List.of());
    }
    List<ScheduleEdges.Edge> edges = ScheduleEdges.of(model, c.order());
    LOG.info("[LMS][0] Schedule: {} (simulated peak {} MiB, levelled {} MiB), {} control edges",
        c.kind(), mib(c.peakBytes()), mib(levelled), edges.size());
    return new Result(rewrite(gd, edges), c.kind(), c.peakBytes(), c, edges);
  }

  /**
   * Adds each edge as a control input {@code ^from} of {@code to}. An edge is skipped when
   * {@code to} already reads {@code from} (data or control input).
   *
   * @throws IllegalArgumentException when an edge names an op the GraphDef does not have, or the
   *                                  edges close a cycle
   */
  public static GraphDef rewrite(GraphDef gd, List<ScheduleEdges.Edge> edges) {
    if (edges.isEmpty()) {
      return gd;
    }
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    int added = 0;
    ControlSources sources = ControlSources.of(nodes);
    for (ScheduleEdges.Edge e : edges) {
      NodeDef.Builder to = nodes.get(e.to());
      if (to == null || !nodes.containsKey(e.from())) {
        throw new IllegalArgumentException("control edge " + e.from() + " -> " + e.to()
            + " names an op the graph does not have: "
            + (to == null ? e.to() : e.from()));
      }
      String from = sources.source(e.from(), Set.of(e.to()));
      boolean present = false;
      for (String in : to.getInputList()) {
        present |= GraphImporter.opName(in).equals(from);
      }
      if (!present && !from.equals(e.to())) {
        to.addInput("^" + from);
        added++;
      }
    }
    GraphDef.Builder out = gd.toBuilder().clearNode();
    nodes.values().forEach(out::addNode);
    GraphDef result = out.build();
    checkAcyclic(result);
    LOG.debug("added {} of {} control edges", added, edges.size());
    return result;
  }

  /**
   * Kahn's algorithm over the node names (a loop's {@code NextIteration -> Merge} back edge
   * does not count); names a few ops on a cycle when there is one. A bias gradient and the
   * filter gradient oneDNN merges it into ({@link UnchainedOps#mergedAsWritten}) count as one
   * op: the merged op waits for the inputs of both, and TensorFlow runs a step whose graph has a
   * cycle without an error, skipping the ops on it and everything after them.
   *
   * @throws IllegalArgumentException naming a few ops on a cycle
   */
  static void checkAcyclic(GraphDef gd) {
    List<String> stuck = cycle(gd);
    if (!stuck.isEmpty()) {
      throw new IllegalArgumentException("the control edges close a cycle through " + stuck);
    }
  }

  /**
   * A few ops on or after a cycle of {@code gd} (as {@link #checkAcyclic} counts them), empty
   * when it has none.
   */
  static List<String> cycle(GraphDef gd) {
    Map<String, Integer> id = new HashMap<>();
    Set<String> backEdgeSources = new HashSet<>();
    for (NodeDef n : gd.getNodeList()) {
      id.put(n.getName(), id.size());
      if (n.getOp().endsWith("NextIteration")) {
        backEdgeSources.add(n.getName());
      }
    }
    int n = id.size();
    // a merged bias gradient is represented by its filter gradient
    int[] rep = new int[n];
    for (int v = 0; v < n; v++) {
      rep[v] = v;
    }
    Map<String, String> merged = UnchainedOps.mergedAsWritten(gd);
    merged.forEach((bias, filter) -> rep[id.get(bias)] = id.get(filter));
    // each merged bias gradient is one op less (a filter gradient is never a bias gradient)
    int nodes = n - merged.size();
    int[] indeg = new int[n];
    List<List<Integer>> succ = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      succ.add(new ArrayList<>());
    }
    for (NodeDef nd : gd.getNodeList()) {
      int v = rep[id.get(nd.getName())];
      for (String in : nd.getInputList()) {
        String src = GraphImporter.opName(in);
        Integer p = id.get(src);
        if (p != null && !backEdgeSources.contains(src) && rep[p] != v) {
          succ.get(rep[p]).add(v);
          indeg[v]++;
        }
      }
    }
    ArrayDeque<Integer> ready = new ArrayDeque<>();
    for (int v = 0; v < n; v++) {
      if (rep[v] == v && indeg[v] == 0) {
        ready.add(v);
      }
    }
    int seen = 0;
    while (!ready.isEmpty()) {
      int v = ready.poll();
      seen++;
      for (int s : succ.get(v)) {
        if (--indeg[s] == 0) {
          ready.add(s);
        }
      }
    }
    List<String> stuck = new ArrayList<>();
    if (seen != nodes) {
      for (NodeDef nd : gd.getNodeList()) {
        int v = rep[id.get(nd.getName())];
        if (indeg[v] > 0 && stuck.size() < 5) {
          stuck.add(nd.getName());
        }
      }
    }
    return stuck;
  }

  private static String mib(long bytes) {
    return String.format("%.1f", bytes / 1048576.0);
  }
}
