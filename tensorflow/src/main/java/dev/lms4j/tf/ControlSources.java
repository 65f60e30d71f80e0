package dev.lms4j.tf;

import java.util.Map;
import org.tensorflow.proto.NodeDefOrBuilder;

/**
 * Where a control edge LMS adds should leave from, so that it does not keep TensorFlow from
 * pruning or fusing the op it names.
 *
 * <p>A control edge out of an {@code Identity} keeps grappler's model pruner from removing that
 * Identity, and a kept Identity can defeat a fusion that expects the tensor itself: oneDNN's
 * layout pass merges {@code Conv2DBackpropFilter(x, sizes, dy)} and {@code BiasAddGrad(dy)} into
 * one {@code _MklNativeConv2DBackpropFilterWithBias} only when both read the same tensor, and
 * {@code Graph.addGradients} hands the filter gradient {@code Identity(dy)}. With a swap-in
 * triggered by that Identity, the two were no longer merged, the bias gradient was summed by
 * another kernel in another order, and on the corpus's resnet-resource (oneDNN on) the third
 * loss moved (2.1666789 instead of 2.1666784): the bias of a convolution before a batch norm has
 * a true gradient of zero, so its computed gradient is all rounding.
 *
 * <p>An Identity that has exactly one input, a data input from an op that itself has inputs,
 * runs as soon as that op has run; a control edge from that op orders the same way. Other
 * Identities (with control inputs of their own, or reading a variable or a constant, which are
 * ready from the start) are kept as the source.
 */
final class ControlSources {
  /** Identities followed at most. */
  private static final int MAX_DEPTH = 16;

  private ControlSources() {}

  /**
   * The op a control edge from {@code name} should leave from.
   *
   * @param nodes the graph's nodes by name
   * @param name  the op the plan names
   * @return {@code name}, or the op behind the Identities that stand for it
   */
  static String of(Map<String, ? extends NodeDefOrBuilder> nodes, String name) {
    String cur = name;
    for (int i = 0; i < MAX_DEPTH; i++) {
      NodeDefOrBuilder n = nodes.get(cur);
      if (n == null || !n.getOp().equals("Identity") || n.getInputCount() != 1
          || n.getInput(0).startsWith("^") || n.getName().startsWith("lms4j/")) {
        return cur;
      }
      String src = GraphImporter.opName(n.getInput(0));
      NodeDefOrBuilder in = nodes.get(src);
      if (in == null || in.getInputCount() == 0) {
        return cur;
      }
      cur = src;
    }
    return cur;
  }
}
