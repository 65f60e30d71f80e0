package dev.lms4j.tf;

import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * The graph before and after a rewrite as Graphviz DOT files, the counterpart of XLA's
 * {@code --xla_rematerialization_dump_dot}: {@code before.dot} marks the ops whose outputs the
 * plan swaps (blue) or recomputes (orange); {@code after.dot} also draws the swap-outs and
 * swap-ins (blue boxes) and the recompute clones (orange boxes). Control edges are dashed.
 *
 * <pre>{@code
 * DotDump.write(Path.of("dot"), gd, result.graphDef(), result.memoryPlan());
 * // dot -Tsvg dot/after.dot > after.svg
 * }</pre>
 */
public final class DotDump {
  private DotDump() {}

  /**
   * Writes {@code before.dot} and {@code after.dot} into {@code dir} (created if missing).
   *
   * @throws UncheckedIOException when the files cannot be written
   */
  public static void write(Path dir, GraphDef before, GraphDef after, MemoryPlan plan) {
    Set<String> swapped = new HashSet<>();
    for (SwapPlan.SwapOut so : plan.swaps().swapOuts()) {
      swapped.add(so.producer());
    }
    Set<String> recomputed = new HashSet<>();
    for (RecomputePlan.Group g : plan.recompute().groups()) {
      recomputed.addAll(g.ops());
    }
    try {
      Files.createDirectories(dir);
      Files.writeString(dir.resolve("before.dot"), dot("before", before, swapped, recomputed));
      Files.writeString(dir.resolve("after.dot"), dot("after", after, swapped, recomputed));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the DOT files to " + dir + ": " + e, e);
    }
  }

  /** One graph in DOT. */
  static String dot(String title, GraphDef gd, Set<String> swapped, Set<String> recomputed) {
    StringBuilder b = new StringBuilder();
    b.append("digraph \"").append(title).append("\" {\n  rankdir=TB;\n")
        .append("  node [shape=ellipse, fontsize=10];\n");
    for (NodeDef n : gd.getNodeList()) {
      String name = n.getName();
      String style;
      if (name.startsWith(OpTypes.LMS_PREFIX + "swap")) {
        style = "shape=box, style=filled, fillcolor=\"#9ecae1\"";
      } else if (name.startsWith(OpTypes.LMS_PREFIX + "recompute")) {
        style = "shape=box, style=filled, fillcolor=\"#fdae6b\"";
      } else if (swapped.contains(name)) {
        style = "style=filled, fillcolor=\"#deebf7\", color=\"#3182bd\"";
      } else if (recomputed.contains(name)) {
        style = "style=filled, fillcolor=\"#fee6ce\", color=\"#e6550d\"";
      } else {
        style = "";
      }
      b.append("  ").append(quote(name)).append(" [label=").append(quote(name + "\\n"
          + n.getOp())).append(style.isEmpty() ? "" : ", " + style).append("];\n");
    }
    for (NodeDef n : gd.getNodeList()) {
      for (String in : n.getInputList()) {
        boolean control = in.startsWith("^");
        String src = control ? in.substring(1) : in;
        int colon = src.lastIndexOf(':');
        String port = "";
        if (colon > 0) {
          port = src.substring(colon + 1);
          src = src.substring(0, colon);
        }
        b.append("  ").append(quote(src)).append(" -> ").append(quote(n.getName()));
        if (control) {
          b.append(" [style=dashed]");
        } else if (!port.isEmpty() && !port.equals("0")) {
          b.append(" [label=").append(quote(port)).append(']');
        }
        b.append(";\n");
      }
    }
    return b.append("}\n").toString();
  }

  private static String quote(String s) {
    return '"' + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\\\\n", "\\n") + '"';
  }

  /** The file names this dump writes, for messages. */
  static String files(Path dir) {
    return String.format(Locale.ROOT, "%s and %s", dir.resolve("before.dot"),
        dir.resolve("after.dot"));
  }
}
