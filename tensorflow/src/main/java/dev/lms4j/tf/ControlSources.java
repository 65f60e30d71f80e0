package dev.lms4j.tf;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.tensorflow.proto.NodeDefOrBuilder;

/**
 * Where a control edge LMS adds should leave from, so that it does not keep oneDNN from merging
 * a filter gradient with its bias gradient.
 *
 * <p>oneDNN's layout pass merges {@code Conv2DBackpropFilter(x, sizes, dy)} and
 * {@code BiasAddGrad(dy)} into one {@code _MklNativeConv2DBackpropFilterWithBias} only when both
 * read the same tensor. {@code Graph.addGradients} hands the filter gradient {@code Identity(dy)},
 * which grappler's model pruner removes, unless a control edge leaves from it. With a swap-in
 * triggered by that Identity the two were no longer merged, the bias gradient was summed by
 * another kernel in another order, and on the corpus's resnet-resource (oneDNN on) the third
 * loss moved (2.1666789 instead of 2.1666784): the bias of a convolution before a batch norm has
 * a true gradient of zero, so its computed gradient is all rounding.
 *
 * <p>So an edge that would leave from such an Identity (one data input, from an op with inputs,
 * read by a filter gradient, its input read by a {@code BiasAddGrad}) leaves from the input
 * gradient ({@code Conv2DBackpropInput}) that reads the same Identity, which becomes ready with
 * the filter gradient, right after the Identity; where there is none (a first layer), from the
 * op behind the Identity. Other Identities stay the source: the executor runs an Identity a few
 * ops after its producer, and moving every trigger to the producer swapped tensors in sooner and
 * made densenet's plans need more memory than they had. The input gradient's other inputs are
 * the filter and the input's shape, so the edge cannot close a cycle through the swap-in.
 */
final class ControlSources {
  private static final Set<String> FILTER_GRADIENTS = Set.of("Conv2DBackpropFilter",
      "Conv3DBackpropFilterV2", "DepthwiseConv2dNativeBackpropFilter");

  private static final Set<String> INPUT_GRADIENTS = Set.of("Conv2DBackpropInput",
      "Conv3DBackpropInputV2", "DepthwiseConv2dNativeBackpropInput");

  /** Identities read by a filter gradient whose input a BiasAddGrad reads too, to their stand-in. */
  private final Map<String, String> merging = new HashMap<>();
  /** Those Identities to the op behind them. */
  private final Map<String, String> behind = new HashMap<>();
  /** The graph, read when a stand-in is checked (builders: the rewriters' edits show). */
  private final Map<String, ? extends NodeDefOrBuilder> nodes;
  /** Bias gradients to the filter gradient oneDNN merges them into ({@link UnchainedOps#merges}). */
  private final Map<String, String> mergedInto;

  private ControlSources(Map<String, ? extends NodeDefOrBuilder> nodes) {
    this.nodes = nodes;
    this.mergedInto = UnchainedOps.merges(nodes.values(), nodes);
    Map<String, Set<String>> readers = new HashMap<>();
    Map<String, String> inputGradient = new HashMap<>();
    for (NodeDefOrBuilder n : nodes.values()) {
      for (int i = 0; i < n.getInputCount(); i++) {
        String in = n.getInput(i);
        if (!in.startsWith("^")) {
          readers.computeIfAbsent(GraphImporter.opName(in), k -> new HashSet<>()).add(n.getOp());
          if (INPUT_GRADIENTS.contains(n.getOp()) && i == 2) {
            inputGradient.putIfAbsent(GraphImporter.opName(in), n.getName());
          }
        }
      }
    }
    for (NodeDefOrBuilder n : nodes.values()) {
      if (!n.getOp().equals("Identity") || n.getInputCount() != 1
          || n.getInput(0).startsWith("^") || n.getName().startsWith("lms4j/")) {
        continue;
      }
      String src = GraphImporter.opName(n.getInput(0));
      NodeDefOrBuilder in = nodes.get(src);
      Set<String> ownReaders = readers.getOrDefault(n.getName(), Set.of());
      if (in != null && in.getInputCount() > 0
          && ownReaders.stream().anyMatch(FILTER_GRADIENTS::contains)
          && readers.getOrDefault(src, Set.of()).contains("BiasAddGrad")) {
        // the input gradient reading the same Identity runs with the filter gradient, right
        // after the Identity; the Identity's producer runs a few ops earlier
        merging.put(n.getName(), inputGradient.getOrDefault(n.getName(), src));
        behind.put(n.getName(), src);
      }
    }
  }

  /** The sources for a graph's nodes (by name); reads the map once. */
  static ControlSources of(Map<String, ? extends NodeDefOrBuilder> nodes) {
    return new ControlSources(nodes);
  }

  /**
   * The op a control edge from {@code name} into an op that {@code readers} read should leave
   * from: {@code name}, or its stand-in when it is an Identity a merge needs pruned (the input
   * gradient reading it, else the op behind it). Where that input gradient is one of
   * {@code readers} or runs after one of them (it reads a recomputed or swapped-in filter: the
   * edge would close a cycle), the op behind the Identity.
   * Measured: remat-xla's plan on the corpus resnet-resource recomputed a weight's
   * {@code ReadVariableOp} for the input gradient that stood in for its trigger; TensorFlow
   * refused the graph (a cycle). A bias gradient counts as running with the filter gradient
   * oneDNN merges it into: on the corpus U-Net with the list scheduler's order, the input
   * gradient waited on a bias update, whose merged op read the recomputed activation the edge
   * gated, and TensorFlow skipped the cycle without an error (no update of the step ran after
   * it: the second loss was 2.2975 instead of 1.4608).
   *
   * @param name    the op the plan names
   * @param readers the ops that read what the edge gates (a clone's or a swap-in's readers, in
   *                the graph as rewritten so far)
   * @return the op the edge should leave from
   */
  String source(String name, Set<String> readers) {
    String s = merging.get(name);
    if (s == null) {
      return name;
    }
    return reaches(s, readers) ? behind.get(name) : s;
  }

  /** True when {@code from} is one of {@code targets} or has one of them as an ancestor. */
  private boolean reaches(String from, Set<String> targets) {
    Set<String> seen = new HashSet<>();
    Deque<String> todo = new ArrayDeque<>();
    todo.add(from);
    while (!todo.isEmpty()) {
      String n = todo.poll();
      if (!seen.add(n)) {
        continue;
      }
      if (targets.contains(n)) {
        return true;
      }
      String merged = mergedInto.get(n);
      if (merged != null) {
        // the merged op runs when all of the filter gradient's inputs are there
        todo.add(merged);
      }
      NodeDefOrBuilder d = nodes.get(n);
      if (d != null) {
        for (int i = 0; i < d.getInputCount(); i++) {
          todo.add(GraphImporter.opName(d.getInput(i)));
        }
      }
    }
    return false;
  }
}
