package dev.lms4j.tf;

import dev.lms4j.core.graph.OpTypes;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Relaxes the control edges that TensorFlow Java's framework optimizers put from every gradient
 * on every update op, keeping only the order the math needs.
 *
 * <p>{@code org.tensorflow.framework.optimizers.Optimizer.applyGradients} (1.1.0) builds each
 * update (for Adam: the {@code ApplyAdam} and the {@code Cast}s of its hyper-parameters) under
 * {@code withControlDependencies(all gradients)}: no variable is updated before the whole
 * backward pass has run, so every weight gradient stays alive until the last one is computed
 * (81 x 81 control edges on a 6-layer encoder). An update of variable {@code v} only has to wait
 * for its own gradient (a data edge) and for every op of the step that reads {@code v} (else
 * that op could see the updated weight); it need not wait for the gradients of other variables.
 *
 * <pre>{@code
 * OptimizerEdges.Result r = OptimizerEdges.relax(trainingGraph);
 * TrainingGraph relaxed = new TrainingGraph(r.graphDef(), trainingGraph.manifest());
 * log.info("{} control edges removed, {} added", r.removedEdges(), r.addedEdges());
 * }</pre>
 *
 * <p>The rewrite:
 * <ol>
 *   <li>finds the relaxed ops: ops of the step, outside the backward scope (default
 *       {@code gradients}), with control inputs from inside it, that update a variable
 *       ({@link OpTypes#isVariableWriter}) or are stateless and read only by relaxed ops (Adam's
 *       {@code Cast}s of its hyper-parameters); those control inputs are removed (other control
 *       inputs stay, and other ops, e.g. an {@code Assert} after the gradients, keep theirs);
 *   <li>restores the order of every pair of ops of the step that touch the same variable (an op
 *       touches a variable when one of its inputs is the variable, directly or through ops that
 *       may share its buffer: {@code Identity}, {@code Reshape}, {@code Squeeze},
 *       {@code ExpandDims}, {@code StopGradient}, {@code Bitcast}, {@code ReadVariableOp}) where at least one of the two writes it
 *       ({@link OpTypes#isVariableWriter}) and at least one is a relaxed op: when the original
 *       graph ran one before the other, a control edge keeps it so if no path does any more.
 *       When the original left the pair unordered (a race in the original graph) and only one of
 *       them was relaxed, the relaxed op stays after the other: the original held it back until
 *       the whole backward pass, while the other was free to run (Adam's {@code beta1_power}
 *       update is such an op: it does not wait for anything, and the {@code Cast}s that read
 *       the power for the updates wait for every gradient).
 * </ol>
 * Only ops that a training step runs (ancestors of the given targets) are considered, so the
 * readers of a variable in its initialiser never enter the step. Edges are added only in the
 * direction of an existing order, so no cycle can appear. The input is not changed. Run it before
 * LMS (on the graph as built): ops under {@code lms4j/} are left alone.
 *
 * <p>Losses stay bit-identical to the original graph's (tested with the framework's Adam on a
 * CNN, in the caller's thread): each update reads the same gradient, the same weights and the
 * same hyper-parameters as before, only earlier. Why no op can see an updated weight it did not
 * see before: an op observes variable {@code v}'s new value only by reading {@code v}'s buffer
 * after an in-place write to it, i.e. by reading {@code v} or a tensor sharing its buffer (the
 * aliasing ops above; every other op's output is a new buffer computed from values it read
 * earlier). Every such reader and every writer of {@code v} is a toucher; for each pair with a
 * writer and a relaxed op, the order the original forced is restored, and an unforced pair keeps
 * the relaxed op second, as the original's edges effectively did. Only edges into relaxed ops
 * were removed, so every other order is unchanged.
 */
public final class OptimizerEdges {
  private static final Logger LOG = LoggerFactory.getLogger(OptimizerEdges.class);

  /** The backward scope the framework's {@code Graph.addGradients} uses by default. */
  public static final String DEFAULT_BACKWARD_SCOPE = "gradients";

  /** The name scope of the ops lms4j inserts (their trigger edges are never touched). */
  private static final String LMS_SCOPE = "lms4j/";

  /** How many aliasing hops a variable read is followed through. */
  private static final int MAX_HOPS = 64;

  /**
   * Ops whose output may share its first input's buffer: an op reading their output reads the
   * variable's memory, so an in-place update that runs first changes what it sees. A ref
   * variable's {@code Identity}, {@code Reshape}, {@code Squeeze}, {@code ExpandDims} and
   * {@code StopGradient} forward its buffer; a resource variable's {@code ReadVariableOp} may
   * too (the update then copies on write, which is safe but costs a copy of the variable, so its
   * readers are kept before the update as well).
   */
  private static final Set<String> ALIASING = Set.of("Identity", "RefIdentity", "Reshape",
      "Squeeze", "ExpandDims", "StopGradient", "ReadVariableOp", "Bitcast");

  private OptimizerEdges() {}

  /**
   * What the rewrite did to one op.
   *
   * @param op      the op's name
   * @param removed the control inputs removed (op names, without {@code ^})
   * @param added   the control inputs added to keep a variable's reads and writes in order
   */
  public record Change(String op, List<String> removed, List<String> added) {
    /**
     * Copies the lists.
     *
     * @param op      the op's name
     * @param removed control inputs removed
     * @param added   control inputs added
     */
    public Change {
      Objects.requireNonNull(op, "op");
      removed = List.copyOf(removed);
      added = List.copyOf(added);
    }
  }

  /**
   * The rewritten graph and what changed.
   *
   * @param graphDef the rewritten graph (the input itself when nothing changed)
   * @param changes  one entry per op whose control inputs changed, in graph order
   */
  public record Result(GraphDef graphDef, List<Change> changes) {
    /**
     * Copies the list.
     *
     * @param graphDef the rewritten graph
     * @param changes  the changes
     */
    public Result {
      Objects.requireNonNull(graphDef, "graphDef");
      changes = List.copyOf(changes);
    }

    /**
     * Whether any edge changed.
     *
     * @return true when the graph was rewritten
     */
    public boolean changed() {
      return !changes.isEmpty();
    }

    /**
     * The number of control edges removed.
     *
     * @return the count
     */
    public int removedEdges() {
      return changes.stream().mapToInt(c -> c.removed().size()).sum();
    }

    /**
     * The number of control edges added to keep variable accesses in order.
     *
     * @return the count
     */
    public int addedEdges() {
      return changes.stream().mapToInt(c -> c.added().size()).sum();
    }
  }

  /**
   * Relaxes the optimizer's control edges of a training graph: the step is what the manifest's
   * loss, metrics and train op need; gradients live under {@value #DEFAULT_BACKWARD_SCOPE}.
   *
   * @param tg the training graph
   * @return the rewritten graph and the changes
   */
  public static Result relax(TrainingGraph tg) {
    Manifest m = tg.manifest();
    List<String> targets = new ArrayList<>();
    targets.add(m.loss());
    targets.add(m.trainOp());
    targets.addAll(m.metrics().values());
    return relax(tg.graphDef(), targets, DEFAULT_BACKWARD_SCOPE);
  }

  /**
   * Relaxes the optimizer's control edges.
   *
   * @param gd            the graph
   * @param targets       what a step runs or fetches (op or tensor names; {@code ^} and output
   *                      indices are ignored)
   * @param backwardScope the name scope of the gradients (without a trailing {@code /})
   * @return the rewritten graph and the changes
   * @throws IllegalArgumentException when a target is not in the graph
   */
  public static Result relax(GraphDef gd, Collection<String> targets, String backwardScope) {
    Objects.requireNonNull(backwardScope, "backwardScope");
    String prefix = backwardScope + "/";
    Map<String, Integer> index = new HashMap<>();
    List<NodeDef> nodes = gd.getNodeList();
    for (int i = 0; i < nodes.size(); i++) {
      index.put(nodes.get(i).getName(), i);
    }
    int n = nodes.size();
    // inputs as node ids, data and control apart
    List<List<Integer>> data = new ArrayList<>(n);
    List<List<Integer>> control = new ArrayList<>(n);
    for (NodeDef node : nodes) {
      List<Integer> d = new ArrayList<>();
      List<Integer> c = new ArrayList<>();
      for (String in : node.getInputList()) {
        Integer src = index.get(GraphImporter.opName(in));
        if (src != null) {
          (in.startsWith("^") ? c : d).add(src);
        }
      }
      data.add(d);
      control.add(c);
    }
    Set<Integer> step = new HashSet<>();
    Deque<Integer> work = new ArrayDeque<>();
    for (String t : targets) {
      Integer id = index.get(GraphImporter.opName(t));
      if (id == null) {
        throw new IllegalArgumentException("target '" + t + "' is not in the graph");
      }
      work.add(id);
    }
    while (!work.isEmpty()) {
      int id = work.pop();
      if (step.add(id)) {
        work.addAll(data.get(id));
        work.addAll(control.get(id));
      }
    }

    // 1. the relaxed ops and the control inputs they lose: updates of variables, and stateless
    //    ops (Adam's Casts) whose every reader is relaxed
    Map<Integer, List<Integer>> candidates = new TreeMap<>();
    for (int id : new TreeSet<>(step)) {
      String name = nodes.get(id).getName();
      if (name.startsWith(prefix) || name.startsWith(LMS_SCOPE)) {
        continue;
      }
      List<Integer> gone = control.get(id).stream()
          .filter(c -> nodes.get(c).getName().startsWith(prefix)).toList();
      if (!gone.isEmpty()) {
        candidates.put(id, gone);
      }
    }
    Map<Integer, List<Integer>> readers = new HashMap<>();
    for (int id : step) {
      for (int src : data.get(id)) {
        readers.computeIfAbsent(src, k -> new ArrayList<>()).add(id);
      }
    }
    Map<Integer, List<Integer>> removed = new TreeMap<>();
    candidates.forEach((id, gone) -> {
      if (writes(nodes.get(id))) {
        removed.put(id, gone);
      }
    });
    for (boolean grew = true; grew; ) {
      grew = false;
      for (Map.Entry<Integer, List<Integer>> e : candidates.entrySet()) {
        int id = e.getKey();
        List<Integer> rs = readers.getOrDefault(id, List.of());
        if (!removed.containsKey(id) && !rs.isEmpty()
            && !OpTypes.isRandomOrStateful(nodes.get(id).getOp())
            && rs.stream().allMatch(removed::containsKey)) {
          removed.put(id, e.getValue());
          grew = true;
        }
      }
    }
    if (removed.isEmpty()) {
      return new Result(gd, List.of());
    }
    List<List<Integer>> newControl = new ArrayList<>(control);
    for (Map.Entry<Integer, List<Integer>> e : removed.entrySet()) {
      List<Integer> keep = new ArrayList<>(control.get(e.getKey()));
      keep.removeAll(e.getValue());
      newControl.set(e.getKey(), keep);
    }

    // 2. variable accesses: which ops of the step touch which variable, and whether they write
    Map<Integer, Set<Integer>> touchers = new TreeMap<>();
    for (int id : step) {
      for (int src : data.get(id)) {
        int v = variableBehind(nodes, data, src);
        if (v >= 0 && v != id) {
          touchers.computeIfAbsent(v, k -> new TreeSet<>()).add(id);
        }
      }
    }
    Map<Integer, List<Integer>> added = new TreeMap<>();
    Reach before = new Reach(data, control);
    Reach after = new Reach(data, newControl);
    for (Set<Integer> ops : touchers.values()) {
      List<Integer> list = new ArrayList<>(ops);
      for (int i = 0; i < list.size(); i++) {
        for (int j = i + 1; j < list.size(); j++) {
          int a = list.get(i);
          int b = list.get(j);
          boolean relaxedA = removed.containsKey(a);
          boolean relaxedB = removed.containsKey(b);
          if (!relaxedA && !relaxedB) {
            continue;
          }
          if (!writes(nodes.get(a)) && !writes(nodes.get(b))) {
            continue;
          }
          int first;
          int second;
          if (before.isAncestor(a, b)) {
            first = a;
            second = b;
          } else if (before.isAncestor(b, a)) {
            first = b;
            second = a;
          } else if (relaxedA != relaxedB) {
            // a race in the original: the relaxed op was held back until the end of the
            // backward pass, the other was free to run, so the relaxed one stays second
            first = relaxedA ? b : a;
            second = relaxedA ? a : b;
          } else {
            continue;
          }
          if (after.isAncestor(second, first)) {
            // cannot happen for an order the original graph had (edges are only added along
            // it); for a race resolved the other way by what remains, keep what remains
            LOG.warn("optimizer edges: {} already runs before {}; no edge added",
                nodes.get(second).getName(), nodes.get(first).getName());
            continue;
          }
          if (!after.isAncestor(first, second)) {
            List<Integer> c = new ArrayList<>(newControl.get(second));
            c.add(first);
            newControl.set(second, c);
            added.computeIfAbsent(second, k -> new ArrayList<>()).add(first);
            after = new Reach(data, newControl);
          }
        }
      }
    }

    // 3. write the graph
    GraphDef.Builder out = gd.toBuilder();
    List<Change> changes = new ArrayList<>();
    Set<Integer> touched = new TreeSet<>(removed.keySet());
    touched.addAll(added.keySet());
    for (int id : touched) {
      NodeDef node = nodes.get(id);
      Set<String> drop = new HashSet<>();
      removed.getOrDefault(id, List.of()).forEach(c -> drop.add(nodes.get(c).getName()));
      NodeDef.Builder b = node.toBuilder().clearInput();
      Set<String> present = new LinkedHashSet<>();
      for (String in : node.getInputList()) {
        if (in.startsWith("^")) {
          if (!drop.contains(in.substring(1)) && present.add(in.substring(1))) {
            b.addInput(in);
          }
        } else {
          b.addInput(in);
        }
      }
      List<String> addedNames = new ArrayList<>();
      for (int c : added.getOrDefault(id, List.of())) {
        String name = nodes.get(c).getName();
        if (present.add(name)) {
          b.addInput("^" + name);
          addedNames.add(name);
        }
      }
      out.setNode(id, b);
      changes.add(new Change(node.getName(), new ArrayList<>(drop).stream().sorted().toList(),
          addedNames));
    }
    Result r = new Result(out.build(), changes);
    LOG.info("optimizer edges: {} control edges from '{}' removed on {} ops, {} added to keep "
        + "variable reads before updates", r.removedEdges(), backwardScope, removed.size(),
        r.addedEdges());
    return r;
  }

  /** Whether the op writes a variable it touches. */
  private static boolean writes(NodeDef node) {
    return OpTypes.isVariableWriter(node.getOp());
  }

  /** The variable whose buffer node {@code id}'s output is (through Identity ops), or -1. */
  private static int variableBehind(List<NodeDef> nodes, List<List<Integer>> data, int id) {
    int p = id;
    for (int hops = 0; hops < MAX_HOPS; hops++) {
      String type = nodes.get(p).getOp();
      if (OpTypes.VARIABLES.contains(type)) {
        return p;
      }
      if (!ALIASING.contains(type) || data.get(p).isEmpty()) {
        return -1;
      }
      p = data.get(p).get(0);
    }
    return -1;
  }

  /** Ancestor queries over data and control edges, memoised per target. */
  private static final class Reach {
    private final List<List<Integer>> data;
    private final List<List<Integer>> control;
    private final Map<Integer, Set<Integer>> ancestors = new HashMap<>();

    Reach(List<List<Integer>> data, List<List<Integer>> control) {
      this.data = data;
      this.control = control;
    }

    /** Whether {@code a} is a (strict) ancestor of {@code b}. */
    boolean isAncestor(int a, int b) {
      return ancestors.computeIfAbsent(b, this::collect).contains(a);
    }

    private Set<Integer> collect(int b) {
      Set<Integer> seen = new HashSet<>();
      Deque<Integer> work = new ArrayDeque<>();
      work.addAll(data.get(b));
      work.addAll(control.get(b));
      while (!work.isEmpty()) {
        int id = work.pop();
        if (seen.add(id)) {
          work.addAll(data.get(id));
          work.addAll(control.get(id));
        }
      }
      return seen;
    }
  }
}
