package dev.lms4j.tf;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tensorflow.Graph;
import org.tensorflow.GraphOperation;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Checks a training GraphDef and its {@link Manifest} before anything is planned or run, so bad
 * input is refused with one clear message ({@link IllegalArgumentException}) instead of failing
 * deep inside import, planning or a session run.
 *
 * <p>The graph: every node has a name, no two share one, every input (data or {@code ^control})
 * names a node of the graph, and TensorFlow imports it. The manifest against the graph: every
 * feed, the loss, the train op, the init op and the metrics name ops of the graph; tensor names
 * use an output the op has; no tensor is fed twice.
 *
 * <pre>{@code
 * GraphChecks.check(graphDef, manifest);   // throws IllegalArgumentException on the first problem
 * }</pre>
 */
public final class GraphChecks {
  private GraphChecks() {}

  /**
   * Checks the graph and the manifest against it.
   *
   * @param gd the graph
   * @param m  its manifest
   * @throws IllegalArgumentException naming the first problem found
   */
  public static void check(GraphDef gd, Manifest m) {
    Map<String, NodeDef> nodes = checkGraph(gd);
    checkNames(nodes, m);
    Map<String, Integer> outputs = outputCounts(gd, referencedOps(m));
    Set<String> fed = new HashSet<>();
    for (Manifest.Feed f : m.feeds()) {
      String t = tensor(f.name(), "feed", outputs);
      if (!fed.add(t)) {
        throw new IllegalArgumentException("manifest: the feed '" + f.name()
            + "' is given twice (as tensor " + t + ")");
      }
    }
    tensor(m.loss(), "loss", outputs);
    m.metrics().forEach((k, v) -> tensor(v, "metric '" + k + "'", outputs));
  }

  /**
   * Checks the graph's structure alone (no TensorFlow needed): names present and unique, every
   * input naming a node of the graph.
   *
   * @param gd the graph
   * @return the nodes by name
   * @throws IllegalArgumentException naming the first problem found
   */
  public static Map<String, NodeDef> checkGraph(GraphDef gd) {
    Map<String, NodeDef> byName = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      if (n.getName().isEmpty()) {
        throw new IllegalArgumentException("the graph has a node without a name (op type '"
            + n.getOp() + "')");
      }
      if (n.getOp().isEmpty()) {
        throw new IllegalArgumentException("the graph's node '" + n.getName()
            + "' has no op type");
      }
      if (byName.put(n.getName(), n) != null) {
        throw new IllegalArgumentException("the graph has two nodes named '" + n.getName() + "'");
      }
    }
    for (NodeDef n : gd.getNodeList()) {
      for (String in : n.getInputList()) {
        String op = GraphImporter.opName(in);
        if (!byName.containsKey(op)) {
          throw new IllegalArgumentException("the graph's node '" + n.getName() + "' reads '"
              + in + "', but the graph has no node named '" + op + "'");
        }
        if (!in.startsWith("^") && in.indexOf(':') >= 0) {
          port(in, "the graph's node '" + n.getName() + "' reads '" + in + "'");
        }
      }
    }
    return byName;
  }

  private static void checkNames(Map<String, NodeDef> nodes, Manifest m) {
    for (Manifest.Feed f : m.feeds()) {
      requireOp(nodes, f.name(), "feed '" + f.name() + "'");
    }
    requireOp(nodes, m.loss(), "loss '" + m.loss() + "'");
    if (m.trainOp().startsWith("^") || m.trainOp().contains(":")) {
      throw new IllegalArgumentException("manifest: train_op names an op, not a tensor: '"
          + m.trainOp() + "'");
    }
    requireOp(nodes, m.trainOp(), "train_op '" + m.trainOp() + "'");
    if (m.init() != null) {
      if (m.init().startsWith("^") || m.init().contains(":")) {
        throw new IllegalArgumentException("manifest: init names an op, not a tensor: '"
            + m.init() + "'");
      }
      requireOp(nodes, m.init(), "init '" + m.init() + "'");
    }
    m.metrics().forEach((k, v) -> requireOp(nodes, v, "metric '" + k + "' ('" + v + "')"));
  }

  private static void requireOp(Map<String, NodeDef> nodes, String name, String what) {
    String op = GraphImporter.opName(name);
    if (!nodes.containsKey(op)) {
      throw new IllegalArgumentException("manifest: " + what + " is not in the graph (no op "
          + "named '" + op + "')");
    }
  }

  private static Set<String> referencedOps(Manifest m) {
    Set<String> ops = new HashSet<>();
    m.feeds().forEach(f -> ops.add(GraphImporter.opName(f.name())));
    ops.add(GraphImporter.opName(m.loss()));
    m.metrics().values().forEach(v -> ops.add(GraphImporter.opName(v)));
    return ops;
  }

  /** Imports the graph into a scratch TF graph and counts the outputs of {@code ops}. */
  private static Map<String, Integer> outputCounts(GraphDef gd, Set<String> ops) {
    Map<String, Integer> n = new HashMap<>();
    try (Graph g = new Graph()) {
      try {
        NativeSwap.ensureLoadedFor(gd);
        g.importGraphDef(gd);
      } catch (RuntimeException e) {
        throw new IllegalArgumentException("TensorFlow cannot import the GraphDef: "
            + firstLine(e.getMessage()));
      }
      for (String op : ops) {
        GraphOperation o = g.operation(op);
        n.put(op, o == null ? 0 : o.numOutputs());
      }
    }
    return n;
  }

  /** Normalizes a tensor name to {@code op:index}, checking the op has that output. */
  private static String tensor(String name, String what, Map<String, Integer> outputs) {
    String op = GraphImporter.opName(name);
    int index = name.lastIndexOf(':') < 0 ? 0 : port(name, "manifest: " + what + " '" + name
        + "'");
    int count = outputs.getOrDefault(op, 0);
    if (index >= count) {
      throw new IllegalArgumentException("manifest: " + what + " '" + name + "': op '" + op
          + "' has " + (count == 0 ? "no outputs" : count == 1 ? "one output (:0)"
          : count + " outputs (:0 to :" + (count - 1) + ")"));
    }
    return op + ":" + index;
  }

  private static int port(String name, String what) {
    String p = name.substring(name.lastIndexOf(':') + 1);
    try {
      int i = Integer.parseInt(p);
      if (i >= 0 && p.equals(Integer.toString(i))) {
        return i;
      }
    } catch (NumberFormatException e) {
      // refused below
    }
    throw new IllegalArgumentException(what + ": the output index '" + p
        + "' is not a number >= 0");
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "(no message)";
    }
    List<String> lines = new ArrayList<>(List.of(s.strip().split("\n")));
    return lines.isEmpty() ? s : lines.get(0);
  }
}
