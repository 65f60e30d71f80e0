package dev.lms4j.tf;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tensorflow.GraphOperation;
import org.tensorflow.proto.NodeDef;

/**
 * The constants TensorFlow holds for the whole session because an initializer computed them from
 * constants: the {@code Fill}s, {@code ZerosLike}s and {@code OnesLike}s (and the {@code Const}s)
 * that variables are assigned from in {@code init}. When the init run's executor is built, they
 * are folded into constants, which the executor keeps, and {@code DirectSession} keeps the
 * executor cached: every training step has that much less memory. Measured on the corpus's GRU
 * (tensorflow-framework's RMSProp fills its rms and momentum slots with
 * {@code Fill(Shape(var), Cast(Const))}): 1.9 MiB were in use before the init run assigned the
 * first random weight, named {@code RMSProp_3/_2__cf__2}, a sixth of the smallest budget
 * (12 MiB) at which tflms trains it.
 *
 * <p>Init computations that are the same computation are merged before they are folded, so one
 * constant is held for them ({@link Keys}): tensorflow-framework's Adam fills a variable's two
 * slots with {@code Fill(Shape(var), Cast(Const 0))} each, and the bias initialisers of equal
 * shape are {@code Fill} of equal constants. Measured on the corpus encoder (framework Adam, the
 * allocator's log of init up to the step's first activation): 8 chunks of 2,048,000 bytes were
 * live (6 variables and slots, 2 constants, where one per slot would make 10), 32 of 262,144
 * (24 and 8, not 16), 16 of 196,608, 20 of 65,536, 17 of 1,536 (12 and 5: 4 slot pairs and one
 * for the 4 equal bias Fills); 28.1 MiB requested in all, where holding every fill made 35.1.
 *
 * <p>TensorFlow's graph optimizer folds any such result up to 10 MiB
 * ({@code max_folded_constant_in_bytes}), even through the {@code PlaceholderWithDefault} that
 * {@link InitConstants} puts in (measured: a 640 KiB {@code Fill(Const, PlaceholderWithDefault(
 * Const))} was held); grappler folds larger uniform Fills, unless {@link InitConstants} rewired
 * them. {@link GraphImporter} adds what this class finds to the model of a step as ops of type
 * {@code BfcReplay.HELD}: the allocator replay allocates them first, as TensorFlow did; the
 * simulator and the planners count nothing for them. (Counted by the planners too, swap and
 * tflms reached 10 MiB on that GRU instead of 14 and 12, but the corpus encoder, whose model
 * errs high elsewhere, was refused below about 103 MiB where it trains at 85.)
 */
final class InitHeldConstants {
  /** The graph optimizer's default limit on a folded constant: 10 MiB. */
  static final long MAX_FOLDED_BYTES = 10L << 20;
  /** Held constants under 1 KiB (scalars, shape vectors, small biases) are left out. */
  static final long MIN_BYTES = 1L << 10;
  private static final Set<String> FOLDED = Set.of("Fill", "ZerosLike", "OnesLike", "Const");
  /**
   * Ops without state or randomness that {@link Keys} lets merge: the ones slot and initial-value
   * fills are built from (a {@code Fill} of a variable's {@code Shape} and a {@code Cast} zero,
   * as tensorflow-framework's optimizers build them).
   */
  private static final Set<String> PURE = Set.of("Const", "Shape", "Cast", "Fill", "ZerosLike",
      "OnesLike", "Identity", "Reshape", "Pack", "ExpandDims", "Size", "Rank");
  /** Ops of {@link #PURE} that read only their input's static shape. */
  private static final Set<String> SHAPE_OF = Set.of("Shape", "Size", "Rank");

  private InitHeldConstants() {}

  /**
   * The nodes outside {@code step} that an initializer assigns from (ancestors of an
   * {@code Assign*} op outside the step) and that TensorFlow folds into a held constant, in graph
   * order; those under {@link #MIN_BYTES} are left out.
   *
   * @param nodes the graph's nodes
   * @param step  the names of the ops a step runs
   * @param ops   the imported graph, for static output shapes
   * @return each held node with its bytes, where the shape is fully known
   */
  static Map<String, Long> of(List<NodeDef> nodes, Set<String> step,
      java.util.function.Function<String, GraphOperation> ops) {
    return find(nodes, step, ops).bytes();
  }

  /**
   * What {@link #of} finds, and the resource variables that share those constants' buffers.
   *
   * @param bytes  each held node with its bytes ({@link #of})
   * @param shared the handle op names of the resource variables init assigns a held constant to,
   *               in graph order ({@link #sharedBy})
   */
  record Held(Map<String, Long> bytes, Set<String> shared) {}

  /**
   * {@link #of} and {@link #sharedBy} in one pass over init's folded computations.
   *
   * @param nodes the graph's nodes
   * @param step  the names of the ops a step runs
   * @param ops   the imported graph, for static output shapes
   */
  static Held find(List<NodeDef> nodes, Set<String> step,
      java.util.function.Function<String, GraphOperation> ops) {
    Map<String, NodeDef> byName = byName(nodes);
    Map<String, List<String>> groups = byKey(nodes, byName, step);
    Set<String> serialized = serializedOnly(nodes);
    Map<String, Long> held = new java.util.LinkedHashMap<>();
    for (List<String> twins : groups.values()) {
      // the same computation as the first of them: merged, one constant held
      NodeDef n = byName.get(twins.get(0));
      if (serialized.contains(n.getName())) {
        continue;
      }
      GraphOperation op = ops.apply(n.getName());
      if (op == null || op.numOutputs() < 1) {
        continue;
      }
      var shape = op.output(0).shape();
      if (shape.isUnknown() || shape.hasUnknownDimension()) {
        continue;
      }
      long bytes = shape.size() * GraphImporter.dtypeSize(op.output(0).dataType());
      boolean rewired = n.getOp().equals("Fill") && n.getInputCount() >= 2
          && n.getInput(1).endsWith(InitConstants.SUFFIX);
      if (bytes >= MIN_BYTES && (bytes <= MAX_FOLDED_BYTES || !rewired)) {
        held.put(n.getName(), bytes);
      }
    }
    return new Held(held, sharedBy(nodes, byName, step, groups, held.keySet()));
  }

  /**
   * The resource variables (their handle ops' names) that init assigns a held constant to: an
   * {@code AssignVariableOp} outside {@code step} whose value is one of {@code held} or a twin
   * merged with it. The assignment cannot take over the buffer of a constant the executor holds,
   * and adopts it shared instead; the variable's first in-place update copies it
   * ({@link dev.lms4j.core.graph.DataflowGraph#initShared()}). Measured on corpus
   * embedding-resource (2026-12-07, {@code LMS4J_BFC_LOG}): init allocated nothing for the
   * momentum slots and biases filled from held constants; their first updates did. An
   * {@code Assign} to a ref variable copies the value into a buffer of its own at init.
   *
   * @param nodes  the graph's nodes
   * @param byName those nodes by name
   * @param step   the names of the ops a step runs
   * @param groups init's folded computations, grouped ({@link #byKey})
   * @param held   the held constants {@link #of} found, by name
   * @return the handle op names, in graph order
   */
  private static Set<String> sharedBy(List<NodeDef> nodes, Map<String, NodeDef> byName,
      Set<String> step, Map<String, List<String>> groups, Set<String> held) {
    Set<String> heldNodes = new HashSet<>();
    for (List<String> twins : groups.values()) {
      if (held.contains(twins.get(0))) {
        heldNodes.addAll(twins);
      }
    }
    Set<String> out = new java.util.LinkedHashSet<>();
    for (NodeDef n : nodes) {
      if (!step.contains(n.getName()) && n.getOp().equals("AssignVariableOp")
          && n.getInputCount() >= 2 && !n.getInput(1).startsWith("^")) {
        String value = GraphImporter.opName(n.getInput(1));
        while (byName.containsKey(value) && byName.get(value).getOp().equals("Identity")) {
          value = GraphImporter.opName(byName.get(value).getInput(0));
        }
        if (heldNodes.contains(value)) {
          out.add(GraphImporter.opName(n.getInput(0)));
        }
      }
    }
    return out;
  }

  /**
   * The init computations {@link #of} merges with a twin (two or more nodes of one {@link Keys}),
   * with the {@link #PURE} ops they are computed from. {@link SerialOrder} leaves them out of
   * init's chain as it leaves {@link #folded} ones: a control edge on one twin, or on what it is
   * computed from, gives it another key, and TensorFlow would hold both constants where the model
   * holds one (a variable's two {@code ZerosLike} slots, or {@code Fill}s of a resource
   * variable's {@code Shape(ReadVariableOp)}, which {@link #folded} does not count).
   *
   * @param nodes the graph's nodes
   * @param step  the names of the ops a step runs
   * @return the twins and their pure ancestors, by name
   */
  static Set<String> merged(List<NodeDef> nodes, Set<String> step) {
    Map<String, NodeDef> byName = byName(nodes);
    Set<String> out = new java.util.LinkedHashSet<>();
    ArrayDeque<String> todo = new ArrayDeque<>();
    byKey(nodes, byName, step).values().stream().filter(twins -> twins.size() > 1)
        .forEach(todo::addAll);
    while (!todo.isEmpty()) {
      NodeDef n = byName.get(todo.poll());
      if (n == null || !PURE.contains(n.getOp()) || !out.add(n.getName())) {
        continue;
      }
      for (String in : n.getInputList()) {
        todo.add(GraphImporter.opName(in));
      }
    }
    return out;
  }

  /**
   * The init nodes TensorFlow folds ({@link #FOLDED}, ancestors of an assignment outside
   * {@code step}) grouped by {@link Keys}: each group one computation, the groups and their
   * nodes in graph order.
   */
  private static Map<String, List<String>> byKey(List<NodeDef> nodes,
      Map<String, NodeDef> byName, Set<String> step) {
    Set<String> init = initNodes(nodes, byName, step);
    Keys keys = new Keys(byName);
    Map<String, List<String>> byKey = new java.util.LinkedHashMap<>();
    for (NodeDef n : nodes) {
      if (init.contains(n.getName()) && FOLDED.contains(n.getOp())) {
        byKey.computeIfAbsent(keys.of(n.getName()), k -> new ArrayList<>()).add(n.getName());
      }
    }
    return byKey;
  }

  /**
   * The nodes whose every consumer is a {@code SerializeTensor}: the initial value of a slot
   * kept on the host ({@link SlotOffload}). The folded constant is the serialized string, whose
   * bytes lie outside the allocator; measured on an Adam MLP with 12 slots of 4 MiB, whose
   * zero fills the model held: predicted 80 MiB, traced 56 (nothing held).
   */
  private static Set<String> serializedOnly(List<NodeDef> nodes) {
    Map<String, Boolean> only = new HashMap<>();
    for (NodeDef n : nodes) {
      for (String in : n.getInputList()) {
        if (!in.startsWith("^")) {
          only.merge(GraphImporter.opName(in), n.getOp().equals("SerializeTensor"),
              Boolean::logicalAnd);
        }
      }
    }
    Set<String> out = new HashSet<>();
    only.forEach((k, v) -> {
      if (v) {
        out.add(k);
      }
    });
    return out;
  }

  private static Map<String, NodeDef> byName(List<NodeDef> nodes) {
    Map<String, NodeDef> byName = new HashMap<>();
    for (NodeDef n : nodes) {
      byName.put(n.getName(), n);
    }
    return byName;
  }

  /** The ancestors of the {@code Assign*} ops outside {@code step}, themselves included. */
  private static Set<String> initNodes(List<NodeDef> nodes, Map<String, NodeDef> byName,
      Set<String> step) {
    ArrayDeque<String> todo = new ArrayDeque<>();
    for (NodeDef n : nodes) {
      if (!step.contains(n.getName()) && n.getOp().startsWith("Assign")) {
        todo.add(n.getName());
      }
    }
    Set<String> init = new HashSet<>();
    while (!todo.isEmpty()) {
      String v = todo.poll();
      NodeDef n = byName.get(v);
      if (n == null || step.contains(v) || !init.add(v)) {
        continue;
      }
      for (String in : n.getInputList()) {
        todo.add(GraphImporter.opName(in));
      }
    }
    return init;
  }

  /**
   * The nodes TensorFlow computes once from constants and variables' static shapes and never
   * runs: ops of {@link #PURE} whose inputs are such nodes, or (for {@code Shape}, {@code Size}
   * and {@code Rank}) variables. {@link SerialOrder} leaves them out of init's chain: a control
   * edge on one would keep the graph optimizer from merging it with its twin
   * ({@link Keys} includes control inputs, as the optimizer compares them), and the folded
   * constant has no place in an order anyway.
   */
  static Set<String> folded(List<NodeDef> nodes) {
    Map<String, NodeDef> byName = byName(nodes);
    Map<String, Boolean> memo = new HashMap<>();
    Set<String> out = new HashSet<>();
    for (NodeDef n : nodes) {
      if (folded(n.getName(), byName, memo)) {
        out.add(n.getName());
      }
    }
    return out;
  }

  private static boolean folded(String name, Map<String, NodeDef> byName,
      Map<String, Boolean> memo) {
    Boolean known = memo.get(name);
    if (known != null) {
      return known;
    }
    NodeDef n = byName.get(name);
    if (n == null || !PURE.contains(n.getOp())) {
      return false;
    }
    memo.put(name, false); // a cycle (none in a valid graph) folds nothing
    boolean shapeOf = SHAPE_OF.contains(n.getOp());
    boolean all = true;
    for (String in : n.getInputList()) {
      String src = GraphImporter.opName(in);
      NodeDef s = byName.get(src);
      boolean ok = folded(src, byName, memo) || (shapeOf && !in.startsWith("^") && s != null
          && dev.lms4j.core.graph.OpTypes.VARIABLES.contains(s.getOp()));
      if (!ok) {
        all = false;
        break;
      }
    }
    memo.put(name, all);
    return all;
  }

  /**
   * What TensorFlow's graph optimizer merges (common subexpression elimination, which it runs
   * with constant folding on every executor's graph): ops of one type with the same attributes,
   * device and inputs (data inputs in order, control inputs as a set), recursively; a
   * {@code Const} by its value as written. Only ops of {@link #PURE} merge; any other op (a
   * variable, a random op, an op not listed) stands for itself. {@link #of} gives two nodes the
   * same key exactly when this rule merges them; keys of one {@code Keys} compare, not across.
   *
   * <p>Keys are memoized per node and interned: a node's key is written from its inputs'
   * interned ids (so it stays short however deep or wide the computation, and a DAG whose
   * branches rejoin costs one key per node), and attribute values longer than 64 bytes (a
   * {@code Const}'s tensor) by their SHA-256 digest.
   */
  static final class Keys {
    private final Map<String, NodeDef> byName;
    private final Map<String, String> byNode = new HashMap<>();
    private final Map<String, String> ids = new HashMap<>();
    private final java.security.MessageDigest sha;

    /** Keys for the nodes of one graph, by name. */
    Keys(Map<String, NodeDef> byName) {
      this.byName = byName;
      try {
        this.sha = java.security.MessageDigest.getInstance("SHA-256");
      } catch (java.security.NoSuchAlgorithmException e) {
        throw new IllegalStateException("SHA-256 is part of every JDK", e);
      }
    }

    /** The key of node {@code name}. */
    String of(String name) {
      String k = byNode.get(name);
      if (k != null) {
        return k;
      }
      NodeDef n = byName.get(name);
      if (n == null || !PURE.contains(n.getOp())) {
        k = "@" + name;
      } else {
        byNode.put(name, "@" + name); // a cycle (none in a valid graph) stands for itself
        StringBuilder b = new StringBuilder(n.getOp()).append('|').append(n.getDevice());
        new java.util.TreeMap<>(n.getAttrMap()).forEach((a, v) -> b.append('|').append(a)
            .append('=').append(value(v.toByteArray())));
        java.util.TreeSet<String> control = new java.util.TreeSet<>();
        for (String in : n.getInputList()) {
          if (in.startsWith("^")) {
            control.add(of(in.substring(1)));
          } else {
            int colon = in.lastIndexOf(':');
            String port = colon < 0 ? "0" : in.substring(colon + 1);
            b.append("|(").append(of(GraphImporter.opName(in))).append(')').append(port);
          }
        }
        control.forEach(c -> b.append("|^(").append(c).append(')'));
        k = ids.computeIfAbsent(b.toString(), x -> "#" + ids.size());
      }
      byNode.put(name, k);
      return k;
    }

    private String value(byte[] bytes) {
      if (bytes.length <= 64) {
        return java.util.Base64.getEncoder().encodeToString(bytes);
      }
      return "sha256:" + java.util.HexFormat.of().formatHex(sha.digest(bytes));
    }
  }
}
