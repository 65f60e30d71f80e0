package dev.lms4j.tf;

import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.memory.BfcReplay;
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
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;

/**
 * Makes the init op create a graph's variables in the order a {@link BfcReplay.Layout} says:
 * the named variables last, in their order, after a primer tensor of the layout's size (so that
 * TensorFlow's BFC allocator grows a region for everything else first, and cuts the last
 * variables' regions to what is left under its limit; see {@link
 * dev.lms4j.core.memory.ResidentLayouts}).
 *
 * <p>How: a variable's initializer is its {@code Assign} or {@code AssignVariableOp} that the
 * init op runs and a step does not, with the ops only it needs (its random draw, scaling, ...).
 * The primer (a {@code RandomUniform} of the layout's bytes, read by nothing, so freed as soon
 * as it is made; a stateful op, so grappler never folds it into a constant) waits on every other
 * variable's initializer; the first of the last variables' initializer ops wait on the primer,
 * each later one's on the one before. Only control edges inside init are added: a step runs
 * none of these ops, and the values are those of the graph as given (the draws are seeded by
 * their own attributes, not by when they run; an unseeded draw differs between runs anyway).
 *
 * <pre>{@code
 * InitOrder.Result r = InitOrder.apply(gd, "init", runOps, List.of("table"), 2 << 20);
 * }</pre>
 *
 * <p>Nothing is changed (and {@link Result#reason()} says why) when the init op or a named
 * variable's initializer is not found, or when the edges would close a cycle (an initializer
 * that reads a later variable's value).
 */
public final class InitOrder {
  private static final Logger LOG = LoggerFactory.getLogger(InitOrder.class);
  /** The primer's name; its shape constant is {@code PRIMER + "/shape"}. */
  public static final String PRIMER = "lms4j/init_primer";
  private static final Set<String> ASSIGNS = Set.of("Assign", "AssignVariableOp");

  private InitOrder() {}

  /**
   * The primer that, made before anything else of init, makes TensorFlow's BFC allocator grow one
   * region of all of {@code limitBytes} (0 under 4 MiB): a MiB above the largest region size the
   * allocator grows below the limit, so the size it doubles to for it is above what is left and
   * the region is cut to that. The allocator then works as a GPU's does without
   * {@code allow_growth}: every tensor is cut from one free chunk, where regions grown by
   * doubling hold a large tensor in a region under twice its size whole. Measured (Intel Xeon,
   * 2026-12-06): ResNet-50 (width 32, 64 x 64 images) at batch 280 under 201 MiB ran out of
   * memory allocating 35 MiB with auto's plan (live tensors peak at 146 MiB); with this primer
   * the same plan trained, traced peak 163 MiB, the same losses. Not a static default: on the
   * corpus DenseNet at 29 MiB one region ran out of memory where the graph's own order trained,
   * so {@code dev.lms4j.tf.run.Probe} tries it on a plan that ran out of memory and keeps it only
   * where it trains.
   *
   * @param limitBytes the allocator's limit
   * @return the primer's bytes, or 0 where the limit is too small for one
   */
  public static long oneRegionPrimer(long limitBytes) {
    long mib = 1L << 20;
    if (limitBytes < 4 * mib) {
      return 0;
    }
    long region = 2 * mib;
    while (region * 2 <= limitBytes - mib) {
      region *= 2;
    }
    return region + mib;
  }

  /**
   * {@code gd} with a one-region primer ({@link #oneRegionPrimer}) made before every other op of
   * {@code init}; null where the limit is too small, init is not found or already has a primer.
   */
  public static GraphDef oneRegion(GraphDef gd, String init, Set<String> runOps,
      long limitBytes) {
    return oneRegion(gd, init, runOps, limitBytes, List.of());
  }

  /**
   * As above, with the variables {@code last} created after the others (in this order), once
   * the primer has grown the region: where init itself runs out of memory in a large
   * variable's initializer, its table-sized temporaries then have the region to themselves.
   * Measured on the corpus init-heavy (a 97.7 MiB table whose initializer holds two more
   * table-sized temporaries): in regions grown by doubling, the graph as given needs 232 to 275
   * MiB from run to run; in one region alone it ran out of memory at 200 and 210 MiB (the other
   * variables' initializers ran while two 97.7 MiB tensors held all of it); with the table
   * created last as well it trained at 198, 201, 205 and 220 MiB, the same losses.
   */
  public static GraphDef oneRegion(GraphDef gd, String init, Set<String> runOps,
      long limitBytes, List<String> last) {
    long primer = oneRegionPrimer(limitBytes);
    if (primer == 0 || init == null
        || gd.getNodeList().stream().anyMatch(n -> n.getName().equals(PRIMER))) {
      return null;
    }
    Result r = apply(gd, init, runOps, last, primer, true);
    return r.changed() ? r.graphDef() : null;
  }

  /**
   * The variables whose initializer runs {@code op}: the variables an assign run by
   * {@code init} (and not by a step) writes, where {@code op} computes the value it assigns
   * (through data edges). Empty where {@code op} is not an op init runs, or a step runs it too.
   */
  public static List<String> initializing(GraphDef gd, String init, Set<String> runOps,
      String op) {
    Objects.requireNonNull(gd, "graph");
    if (init == null || op == null) {
      return List.of();
    }
    Set<String> initOps = GraphImporter.ancestors(gd, Set.of(init));
    Set<String> step = GraphImporter.ancestors(gd, runOps);
    if (!initOps.contains(op) || step.contains(op)) {
      return List.of();
    }
    Map<String, NodeDef> byName = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      byName.put(n.getName(), n);
    }
    List<String> variables = new ArrayList<>();
    for (NodeDef n : gd.getNodeList()) {
      if (ASSIGNS.contains(n.getOp()) && initOps.contains(n.getName())
          && !step.contains(n.getName()) && n.getInputCount() > 1) {
        String v = GraphImporter.opName(n.getInput(0));
        if (!variables.contains(v) && computes(byName, op, n.getInput(1))) {
          variables.add(v);
        }
      }
    }
    return variables;
  }

  /**
   * True when {@code op} computes {@code value} or one of its data inputs, transitively (control
   * edges are not followed: the serial order chains init's ops one after the other).
   */
  private static boolean computes(Map<String, NodeDef> byName, String op, String value) {
    Set<String> seen = new HashSet<>();
    java.util.ArrayDeque<String> todo = new java.util.ArrayDeque<>();
    todo.add(GraphImporter.opName(value));
    while (!todo.isEmpty()) {
      String v = todo.poll();
      if (v.equals(op)) {
        return true;
      }
      NodeDef n = byName.get(v);
      if (n != null && seen.add(v)) {
        for (String in : n.getInputList()) {
          if (!in.startsWith("^")) {
            todo.add(GraphImporter.opName(in));
          }
        }
      }
    }
    return false;
  }

  /**
   * What {@link #apply} did.
   *
   * @param graphDef   the graph (the input when nothing changed)
   * @param addedEdges control edges added
   * @param reason     why nothing changed, or null
   */
  public record Result(GraphDef graphDef, int addedEdges, String reason) {
    /** True when the graph was changed. */
    public boolean changed() {
      return reason == null;
    }
  }

  /**
   * Orders {@code gd}'s init.
   *
   * @param gd          the graph
   * @param init        the init op's name
   * @param runOps      the ops a step runs (tensor or op names): their ancestors are not touched
   * @param last        the variables (op names) to create last, in this order
   * @param primerBytes the primer's size (0: none; rounded down to whole floats)
   */
  public static Result apply(GraphDef gd, String init, Set<String> runOps, List<String> last,
      long primerBytes) {
    return apply(gd, init, runOps, last, primerBytes, false);
  }

  /**
   * As above; with {@code primerFirst} the primer runs before every other op of init (it sets
   * the size of the allocator's first region, which the other variables and the step then
   * share), and the first of the last variables waits for the other variables' initializers.
   */
  public static Result apply(GraphDef gd, String init, Set<String> runOps, List<String> last,
      long primerBytes, boolean primerFirst) {
    Objects.requireNonNull(gd, "graph");
    if (last.isEmpty() && primerBytes == 0) {
      return new Result(gd, 0, "nothing to order");
    }
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    if (init == null || !nodes.containsKey(init)) {
      return unchanged(gd, "no init op");
    }
    if (nodes.containsKey(PRIMER)) {
      return unchanged(gd, "init is ordered already");
    }
    Set<String> step = GraphImporter.ancestors(gd, runOps);
    Set<String> initOps = GraphImporter.ancestors(gd, Set.of(init));
    // every initializer (assign run by init, not by a step) by the variable it writes
    Map<String, List<String>> assigns = new LinkedHashMap<>();
    for (String name : initOps) {
      NodeDef.Builder b = nodes.get(name);
      if (b != null && ASSIGNS.contains(b.getOp()) && !step.contains(name)
          && b.getInputCount() > 0) {
        assigns.computeIfAbsent(GraphImporter.opName(b.getInput(0)), k -> new ArrayList<>())
            .add(name);
      }
    }
    Set<String> lastSet = new HashSet<>(last);
    Set<String> others = new HashSet<>();
    for (Map.Entry<String, List<String>> e : assigns.entrySet()) {
      if (!lastSet.contains(e.getKey())) {
        others.addAll(e.getValue());
      }
    }
    // what the other initializers need stays out of the groups ordered after the primer
    Set<String> shared = GraphImporter.ancestors(gd, others);
    List<List<String>> groups = new ArrayList<>();
    for (String v : last) {
      List<String> as = assigns.get(v);
      if (as == null) {
        return unchanged(gd, "no initializer for " + v);
      }
      List<String> group = new ArrayList<>();
      for (String a : GraphImporter.ancestors(gd, new HashSet<>(as))) {
        NodeDef.Builder b = nodes.get(a);
        if (b != null && initOps.contains(a) && !step.contains(a) && !shared.contains(a)
            && !OpTypes.isResident(b.getOp())) {
          group.add(a);
        }
      }
      if (group.isEmpty()) {
        return unchanged(gd, "the initializer of " + v + " is shared with other variables'");
      }
      groups.add(group);
    }
    int added = 0;
    List<String> before = new ArrayList<>(others);
    before.sort(null);
    if (primerBytes > 0) {
      long floats = primerBytes / 4;
      TensorProto shape = TensorProto.newBuilder().setDtype(DataType.DT_INT64)
          .setTensorShape(TensorShapeProto.newBuilder().addDim(TensorShapeProto.Dim.newBuilder()
              .setSize(1))).addInt64Val(floats).build();
      nodes.put(PRIMER + "/shape", NodeDef.newBuilder().setName(PRIMER + "/shape").setOp("Const")
          .putAttr("dtype", AttrValue.newBuilder().setType(DataType.DT_INT64).build())
          .putAttr("value", AttrValue.newBuilder().setTensor(shape).build()));
      NodeDef.Builder primer = NodeDef.newBuilder().setName(PRIMER).setOp("RandomUniform")
          .addInput(PRIMER + "/shape")
          .putAttr("dtype", AttrValue.newBuilder().setType(DataType.DT_FLOAT).build())
          .putAttr("T", AttrValue.newBuilder().setType(DataType.DT_INT64).build())
          .putAttr("seed", AttrValue.newBuilder().setI(1).build())
          .putAttr("seed2", AttrValue.newBuilder().setI(1).build());
      if (primerFirst) {
        for (String op : initOps) {
          NodeDef.Builder b = nodes.get(op);
          if (b != null && !step.contains(op) && !OpTypes.isResident(b.getOp())
              && !op.equals(init)) {
            b.addInput("^" + PRIMER);
            added++;
          }
        }
      } else {
        for (String o : before) {
          primer.addInput("^" + o);
          added++;
        }
        before = List.of(PRIMER);
      }
      nodes.put(PRIMER, primer);
    }
    for (int i = 0; i < groups.size(); i++) {
      for (String op : groups.get(i)) {
        NodeDef.Builder b = nodes.get(op);
        for (String p : before) {
          String edge = "^" + p;
          if (!b.getInputList().contains(edge)) {
            b.addInput(edge);
            added++;
          }
        }
      }
      List<String> as = new ArrayList<>(assigns.get(last.get(i)));
      as.sort(null);
      before = as;
    }
    GraphDef.Builder out = gd.toBuilder().clearNode();
    nodes.values().forEach(out::addNode);
    GraphDef result = out.build();
    try {
      ScheduleRewriter.checkAcyclic(result);
    } catch (IllegalArgumentException e) {
      return unchanged(gd, "the order would close a cycle (" + e.getMessage() + ")");
    }
    return new Result(result, added, null);
  }

  private static Result unchanged(GraphDef gd, String reason) {
    LOG.info("[LMS][0] Init order left as given: {}", reason);
    return new Result(gd, 0, reason);
  }
}
