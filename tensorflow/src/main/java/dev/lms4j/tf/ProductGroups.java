package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.Reassociation;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Writes grappler's regrouping of products ({@link Reassociation}) into a GraphDef before
 * planning, so the graph lms4j plans is the graph TensorFlow runs, and a plan cannot change it.
 *
 * <p>Grappler rebuilds a tree of products only while its inner ops are read by their parent
 * alone and drive no control edge, and it sorts the leaves it pairs by size, then by name. A
 * swap-in or a clone re-pointed into such a tree, or a control edge out of one of its ops, would
 * make grappler build another tree, or none, than it builds for the graph as given: the product
 * then rounds differently (measured on the corpus encoder: a swapped attention softmax moved the
 * third loss by 1e-7 relative) and its memory is not what was planned. Written here, each
 * rebuilt op carries grappler's own tag ({@link #TAG}), which its {@code MinimizeBroadcasts}
 * stage skips; a division by a constant becomes a product with a {@code Reciprocal} of it, named
 * as constant folding names the one it makes, and folded by it as it would be; an op grappler
 * would merge into an identical one has its readers read that one. The values are those
 * TensorFlow computes for the graph as given, bit for bit ({@code ProductGroupsTest}).
 */
public final class ProductGroups {
  /** The tag grappler's {@code MinimizeBroadcasts} stage puts on the ops it rebuilt. */
  public static final String TAG = "_grappler:ArithmeticOptimizer:MinimizeBroadcasts";

  private ProductGroups() {}

  /**
   * The rewrite's outcome.
   *
   * @param graphDef the graph with the groups written in
   * @param groups   product trees written
   * @param merged   ops whose readers now read the identical op grappler keeps
   * @param unwritten the ops of the trees grappler groups that were not written (not exact, or
   *                  their reciprocal's name taken): grappler groups them as it does for the
   *                  graph as given, as long as no control edge goes into or out of them
   */
  public record Result(GraphDef graphDef, int groups, int merged, Set<String> unwritten) {
    public Result {
      unwritten = Set.copyOf(unwritten);
    }

    /** True when the graph changed. */
    public boolean changed() {
      return groups > 0 || merged > 0;
    }
  }

  /** Names of the ops of {@code gd} grappler's stage has rebuilt already (they carry its tag). */
  public static Set<String> tagged(GraphDef gd) {
    Set<String> s = new HashSet<>();
    for (NodeDef n : gd.getNodeList()) {
      if (n.containsAttr(TAG)) {
        s.add(n.getName());
      }
    }
    return s;
  }

  /**
   * Writes into {@code gd} the products grappler will group and merge when a step runs
   * {@code runOps}, which must name every op a step fetches (the loss, the train op, metrics:
   * grappler leaves them alone, and an op grouped into a tree takes another value); with none,
   * nothing is written.
   *
   * @param feedShapes static shapes of the feeds, by name (may be empty)
   */
  public static Result apply(GraphDef gd, Map<String, long[]> feedShapes, Set<String> runOps) {
    return apply(gd, feedShapes, -1, runOps);
  }

  /** As {@link #apply(GraphDef, Map, Set)}, with a batch size for unknown first dimensions. */
  public static Result apply(GraphDef gd, Map<String, long[]> feedShapes, int batchSize,
      Set<String> runOps) {
    if (runOps.isEmpty()) {
      // what a step fetches is not known: a fetched op keeps its value
      return new Result(gd, 0, 0, Set.of());
    }
    DataflowGraph raw = GraphImporter.importAsWritten(gd, feedShapes, batchSize,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, runOps);
    return apply(gd, raw, Reassociation.predict(raw, GraphImporter.preserved(runOps),
        tagged(gd)));
  }

  /**
   * Writes {@code p} (predicted on {@code model}, imported from {@code gd} without regrouping)
   * into {@code gd}: its merges and its exact groups ({@link Reassociation.Group#exact}).
   */
  public static Result apply(GraphDef gd, DataflowGraph model, Reassociation.Prediction p) {
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    Map<Integer, Integer> dups = p.duplicates();
    Map<String, String> merged = new LinkedHashMap<>();
    for (Map.Entry<Integer, Integer> e : dups.entrySet()) {
      merged.put(model.op(e.getKey()).name(), model.op(e.getValue()).name());
    }
    if (!merged.isEmpty()) {
      for (NodeDef.Builder b : nodes.values()) {
        for (int i = 0; i < b.getInputCount(); i++) {
          String in = b.getInput(i);
          if (in.startsWith("^")) {
            continue;
          }
          String keep = merged.get(in.endsWith(":0") ? in.substring(0, in.length() - 2) : in);
          if (keep != null) {
            b.setInput(i, keep);
          }
        }
      }
    }
    int groups = 0;
    List<NodeDef> reciprocals = new ArrayList<>();
    Set<String> unwritten = new HashSet<>();
    for (Reassociation.Group gr : p.groups()) {
      if (!gr.exact() || gr.reciprocals().stream().anyMatch(r -> nodes.containsKey(
          Reassociation.RECIPROCAL_PREFIX + model.op(r).name()
              + Reassociation.RECIPROCAL_SUFFIX))) {
        // (a taken name: a graph grappler has run on, its reciprocal is there already)
        gr.members().forEach(m -> unwritten.add(model.op(m).name()));
        continue;
      }
      groups++;
      Map<TensorId, String> divisors = new LinkedHashMap<>();
      for (int r : gr.reciprocals()) {
        Op div = model.op(r);
        String name = Reassociation.RECIPROCAL_PREFIX + div.name()
            + Reassociation.RECIPROCAL_SUFFIX;
        NodeDef.Builder d = nodes.get(div.name());
        reciprocals.add(NodeDef.newBuilder().setName(name).setOp("Reciprocal")
            .addInput(d.getInput(1)).setDevice(d.getDevice())
            .putAttr("T", d.getAttrOrThrow("T")).build());
        divisors.put(div.inputs().get(1), name);
      }
      for (int m : gr.members()) {
        NodeDef.Builder b = nodes.get(model.op(m).name());
        List<String> control = new ArrayList<>();
        for (String in : b.getInputList()) {
          if (in.startsWith("^")) {
            control.add(in);
          }
        }
        b.clearInput();
        for (TensorId t : gr.inputs().get(m)) {
          String div = divisors.get(t);
          b.addInput(div != null ? div : inputName(model, t, dups));
        }
        b.addAllInput(control);
        b.setOp("Mul");
        b.putAttr(TAG, AttrValue.newBuilder().setB(true).build());
      }
    }
    if (groups == 0 && merged.isEmpty()) {
      return new Result(gd, 0, 0, unwritten);
    }
    GraphDef.Builder out = gd.toBuilder().clearNode();
    for (NodeDef.Builder b : nodes.values()) {
      out.addNode(b);
    }
    out.addAllNode(reciprocals);
    return new Result(out.build(), groups, merged.size(), unwritten);
  }

  private static String inputName(DataflowGraph model, TensorId t, Map<Integer, Integer> dups) {
    Integer keep = t.output() == 0 ? dups.get(t.op()) : null;
    String name = model.op(keep != null ? keep : t.op()).name();
    return t.output() == 0 ? name : name + ":" + t.output();
  }
}
