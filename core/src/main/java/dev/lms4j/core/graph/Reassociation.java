package dev.lms4j.core.graph;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Predicts how grappler's arithmetic optimizer regroups products before a step runs, so the
 * memory model sees the graph TensorFlow executes.
 *
 * <p>Grappler's {@code MinimizeBroadcasts} stage takes a tree of {@code Mul} ops (inner ops read
 * by their parent only, no control edges in or out, not fetched) and rebuilds it so the smallest
 * operands are multiplied first. Before that, constant folding turns a division by a constant
 * into a product with its reciprocal, and the arithmetic optimizer sorts every product's inputs
 * by name. The rebuilt tree reads its leaves in another grouping: in a gradient
 * {@code (s * g) * 0.125} becomes {@code (0.125 * s) * g}, and {@code 0.125 * s} needs only the
 * forward pass's {@code s}, so TensorFlow computes it there and holds it until the backward pass
 * (measured on the corpus encoder: 2 MiB per attention layer, and the layer norm's
 * {@code d / n} 0.5 MiB each, 3.5 MiB per layer the model did not see).
 *
 * <p>The prediction follows the stage as TensorFlow 2.18 runs it: trees are collected from their
 * topmost product (grappler visits ops consumers first), leaves in depth-first order of the
 * name-sorted inputs; leaves are sorted by element count (stable); an odd last leaf, the largest,
 * is kept for the root; the others are paired from the front, each pair taking over the
 * last-collected inner op, its product (counted as a scalar, as grappler counts it) going back
 * to the front where the next two operands differ in size, else to the back. Groups whose leaves
 * all have one shape are left as they are.
 */
public final class Reassociation {
  private Reassociation() {}

  /** Prefix of the reciprocal constant folding makes of a divisor. */
  public static final String RECIPROCAL_PREFIX = "ConstantFolding/";

  /** Suffix of the reciprocal constant folding makes of a divisor. */
  public static final String RECIPROCAL_SUFFIX = "_recip";

  /**
   * One rebuilt product tree.
   *
   * @param root        the tree's root (keeps its consumers)
   * @param members     the tree's ops, root first, then inner ops in the order grappler
   *                    collected them
   * @param inputs      per member, the two operands it multiplies after the rebuild (leaves or
   *                    other members' outputs)
   * @param reciprocals members that were a division by a constant: the divisor's operand in
   *                    {@code inputs} stands for its reciprocal
   * @param exact       true when grappler is predicted to build exactly this tree: at most one
   *                    constant leaf (constant folding multiplies two constants of a product
   *                    together first, which this prediction does not follow), no square among
   *                    the leaves, and no divisor that is also another operand of the tree
   */
  public record Group(int root, List<Integer> members, Map<Integer, List<TensorId>> inputs,
      Set<Integer> reciprocals, boolean exact) {}

  /**
   * What grappler does to {@code g}'s products.
   *
   * @param duplicates ops merged into an identical earlier op (by id, the op kept)
   * @param groups     the product trees rebuilt, found after the merges
   */
  public record Prediction(Map<Integer, Integer> duplicates, List<Group> groups) {
    /** True when grappler changes none of the graph's products. */
    public boolean isEmpty() {
      return duplicates.isEmpty() && groups.isEmpty();
    }
  }

  /** Ops grappler merges when they are identical: two-input products and sums of floats. */
  static final Set<String> DEDUP_TYPES = Set.of("Mul", "AddV2", "Add");

  /**
   * What grappler does to the products in {@code g}.
   *
   * @param g        the graph as given (before grappler)
   * @param preserve names of the ops a step fetches: grappler never absorbs or merges them
   */
  public static Prediction predict(DataflowGraph g, Set<String> preserve) {
    return predict(g, preserve, Set.of());
  }

  /**
   * As {@link #predict(DataflowGraph, Set)}, where the ops named in {@code done} were rebuilt
   * already (grappler leaves them alone: they carry its tag).
   */
  public static Prediction predict(DataflowGraph g, Set<String> preserve, Set<String> done) {
    Map<Integer, Integer> dups = duplicates(g, preserve);
    DataflowGraph merged = merge(g, dups);
    Context c = new Context(merged, preserve);
    List<Group> groups = new ArrayList<>();
    boolean[] tagged = new boolean[merged.size()];
    for (String name : done) {
      merged.op(name).ifPresent(op -> tagged[op.id()] = true);
    }
    int[] topo = merged.topologicalOrder();
    for (int k = topo.length - 1; k >= 0; k--) {
      int v = topo[k];
      if (tagged[v] || !c.product(v) || !c.broadcastable(v)) {
        continue;
      }
      Group gr = c.group(v, tagged);
      if (gr != null) {
        groups.add(gr);
      }
    }
    return new Prediction(Map.copyOf(dups), List.copyOf(groups));
  }

  /**
   * Two-input float products and sums that read the same operands (in either order) as an
   * earlier one, with no control edges and not fetched: grappler's common-subexpression
   * elimination keeps the first (e.g. the two halves of {@code x * x}'s gradient).
   */
  static Map<Integer, Integer> duplicates(DataflowGraph g, Set<String> preserve) {
    Map<String, Integer> seen = new HashMap<>();
    Map<Integer, Integer> dup = new HashMap<>();
    for (int v : g.topologicalOrder()) {
      Op op = g.op(v);
      if (!DEDUP_TYPES.contains(op.type()) || op.inputs().size() != 2
          || op.outputs().size() != 1 || !op.controlInputs().isEmpty()
          || preserve.contains(op.name()) || !op.output(0).dtype().startsWith("float")) {
        continue;
      }
      List<String> in = new ArrayList<>();
      for (TensorId t : op.inputs()) {
        Integer d = dup.get(t.op());
        in.add((d == null ? t.op() : d) + ":" + t.output());
      }
      java.util.Collections.sort(in);
      String key = op.type() + "|" + op.device() + "|" + op.output(0).dtype() + "|" + in;
      Integer first = seen.putIfAbsent(key, v);
      if (first != null) {
        dup.put(v, first);
      }
    }
    return dup;
  }

  /** {@code g} with each merged op an {@code Identity} of the op kept (it allocates nothing). */
  static DataflowGraph merge(DataflowGraph g, Map<Integer, Integer> dups) {
    if (dups.isEmpty()) {
      return g;
    }
    Map<Integer, Op> replaced = new HashMap<>();
    for (Map.Entry<Integer, Integer> e : dups.entrySet()) {
      Op op = g.op(e.getKey());
      replaced.put(op.id(), new Op(op.id(), op.name(), "Identity", op.category(), op.device(),
          List.of(new TensorId(e.getValue(), 0)), op.controlInputs(), op.outputs(),
          Op.SCRATCH_UNKNOWN));
    }
    return g.withEdits(replaced, List.of());
  }

  /**
   * {@code g} as grappler will run it: merged ops read the op kept, and the exact groups' ops
   * ({@link Group#exact}) read their rebuilt operands (a division by a constant becomes a
   * {@code Mul}); ops keep their names, ids and outputs.
   */
  public static DataflowGraph apply(DataflowGraph g, Prediction p) {
    if (p.isEmpty()) {
      return g;
    }
    DataflowGraph merged = merge(g, p.duplicates());
    Map<Integer, Op> replaced = new HashMap<>();
    for (Group gr : p.groups()) {
      if (!gr.exact()) {
        continue; // lms4j writes only exact groups into the graphs it rewrites
      }
      for (int m : gr.members()) {
        Op op = merged.op(m);
        List<TensorId> in = gr.inputs().get(m);
        if (in.equals(op.inputs()) && op.type().equals("Mul")) {
          continue;
        }
        replaced.put(m, new Op(op.id(), op.name(), "Mul", op.category(), op.device(), in,
            op.controlInputs(), op.outputs(), op.scratch()));
      }
    }
    return replaced.isEmpty() ? merged : merged.withEdits(replaced, List.of());
  }

  /** Predicts and applies ({@link #predict(DataflowGraph, Set, Set)}, {@link #apply}). */
  public static DataflowGraph regroup(DataflowGraph g, Set<String> preserve, Set<String> done) {
    return apply(g, predict(g, preserve, done));
  }

  private static final class Context {
    final DataflowGraph g;
    final Set<String> preserve;
    final boolean[] constant;
    final boolean[] drivesControl;

    Context(DataflowGraph g, Set<String> preserve) {
      this.g = g;
      this.preserve = preserve;
      this.constant = g.constantFoldable();
      if (g.dynamicShapeReads() != null) {
        // a divisor computed from a shape grappler cannot infer is no constant to it: the
        // division stays one (traced: the einsum encoder's layer-norm gradients divided in the
        // backward pass, where the encoder's, whose shapes a reshape fixes, were hoisted)
        boolean[] dynamic = g.shapeDynamic();
        for (int v = 0; v < constant.length; v++) {
          constant[v] &= !dynamic[v];
        }
      }
      this.drivesControl = new boolean[g.size()];
      for (Op op : g.ops()) {
        for (int p : op.controlInputs()) {
          drivesControl[p] = true;
        }
      }
    }

    /** A float product, or a float division by a constant (a product with its reciprocal). */
    boolean product(int v) {
      Op op = g.op(v);
      if (op.inputs().size() != 2 || op.outputs().size() != 1 || constant[v]) {
        return false;
      }
      String dt = op.output(0).dtype();
      if (!dt.startsWith("float") && !dt.startsWith("complex") || dt.equals("float16")) {
        return false; // grappler leaves half precision alone; ints do not matter for memory
      }
      if (op.type().equals("Mul")) {
        return !square(op); // Square(x) by then (ReplaceMulWithSquare)
      }
      return (op.type().equals("Div") || op.type().equals("RealDiv"))
          && constant[op.inputs().get(1).op()];
    }

    boolean reciprocal(int v) {
      return !g.op(v).type().equals("Mul");
    }

    /**
     * Every input broadcasts to the op's output shape, and grappler knows the shape of each and
     * of the output (its stage wants shapes it can prove broadcastable: traced on the einsum
     * encoder, whose attention follows a gather of the fed ids, the softmax gradient's
     * {@code (s * d) * 0.125} stayed as written, where the encoder's, after a reshape to a
     * constant shape, became {@code (0.125 * s) * d}).
     */
    boolean broadcastable(int v) {
      Op op = g.op(v);
      long[] out = op.output(0).shape();
      if (!g.shapeKnownToGrappler(new TensorId(v, 0))) {
        return false;
      }
      for (TensorId t : op.inputs()) {
        if (!broadcasts(g.tensor(t).shape(), out) || !g.shapeKnownToGrappler(t)) {
          return false;
        }
      }
      return true;
    }

    boolean absorbable(int root, int v) {
      Op op = g.op(v);
      if (!product(v) || preserve.contains(op.name()) || !op.controlInputs().isEmpty()
          || drivesControl[v] || !op.device().equals(g.op(root).device())) {
        return false;
      }
      // read once, by one op (shape-only readers are folded to constants; measured: the cube
      // in tanh-GELU, read by a Mul and by its gradient's Shape, is absorbed)
      int reads = 0;
      for (int c : g.consumers(new TensorId(v, 0))) {
        if (!OpTypes.SHAPE_ONLY.contains(g.op(c).type())) {
          reads++;
        }
      }
      return reads == 1 && broadcastable(v);
    }

    /** The inputs grappler's canonical order gives a product: sorted by name. */
    List<Leaf> sortedInputs(int v) {
      Op op = g.op(v);
      List<Leaf> in = new ArrayList<>(2);
      for (int i = 0; i < 2; i++) {
        TensorId t = op.inputs().get(i);
        String name = reciprocal(v) && i == 1
            ? RECIPROCAL_PREFIX + op.name() + RECIPROCAL_SUFFIX : inputName(g, t);
        in.add(new Leaf(t, name, elements(g.tensor(t).shape()), -1));
      }
      in.sort(Comparator.comparing(Leaf::name));
      return in;
    }

    Group group(int root, boolean[] tagged) {
      List<Integer> inner = new ArrayList<>();
      List<Leaf> leaves = new ArrayList<>();
      for (Leaf top : sortedInputs(root)) {
        Deque<Leaf> todo = new ArrayDeque<>();
        todo.push(top);
        while (!todo.isEmpty()) {
          Leaf t = todo.pop();
          int p = t.tensor().op();
          if (t.tensor().output() == 0 && !tagged[p] && absorbable(root, p)) {
            inner.add(p);
            List<Leaf> in = sortedInputs(p);
            for (int i = in.size() - 1; i >= 0; i--) {
              todo.push(in.get(i));
            }
          } else {
            leaves.add(t);
          }
        }
      }
      if (inner.isEmpty()) {
        return null;
      }
      List<Integer> members = new ArrayList<>();
      members.add(root);
      members.addAll(inner);
      for (int m : members) {
        tagged[m] = true;
      }
      Set<String> sigs = new HashSet<>();
      for (Leaf l : leaves) {
        sigs.add(Arrays.toString(g.tensor(l.tensor()).shape()));
      }
      if (sigs.size() <= 1) {
        return null; // one shape: nothing to reorder
      }
      // stable sort by size, smallest first
      List<Leaf> ops = new ArrayList<>(leaves);
      ops.sort(Comparator.comparingLong(Leaf::elements));
      Deque<Leaf> queue = new ArrayDeque<>(ops);
      Leaf leftover = null;
      if (queue.size() % 2 != 0) {
        leftover = queue.pollLast();
      }
      Deque<Integer> free = new ArrayDeque<>(inner);
      Map<Integer, List<TensorId>> inputs = new HashMap<>();
      do {
        Leaf lhs = queue.pollFirst();
        Leaf rhs = queue.pollFirst();
        int node = free.isEmpty() ? root : free.pollLast();
        inputs.put(node, List.of(lhs.tensor(), rhs.tensor()));
        // the rebuilt op's shape counts as a scalar, as grappler's does
        Leaf updated = new Leaf(new TensorId(node, 0), g.op(node).name(), 1, node);
        if (queue.size() >= 2 && queue.peekFirst().elements() < second(queue).elements()) {
          queue.addFirst(updated);
        } else {
          queue.addLast(updated);
        }
      } while (queue.size() > 1);
      if (leftover != null) {
        inputs.put(root, List.of(queue.pollFirst().tensor(), leftover.tensor()));
      }
      Set<Integer> recips = new HashSet<>();
      for (int m : members) {
        if (reciprocal(m)) {
          recips.add(m);
        }
        if (!inputs.containsKey(m)) {
          return null; // cannot happen with n - 1 ops for n leaves; keep the graph as it is
        }
      }
      int constants = 0;
      boolean hasSquare = false;
      Map<TensorId, Integer> uses = new HashMap<>();
      for (Leaf l : leaves) {
        constants += constant[l.tensor().op()] ? 1 : 0;
        hasSquare |= square(g.op(l.tensor().op()));
        uses.merge(l.tensor(), 1, Integer::sum);
      }
      // a square among the leaves (tanh-GELU's x * x * x * c): constant folding's push-down and
      // the square's rewrite interleave with this stage, and the tree grappler builds was seen
      // to differ between two graphs of that same form (the corpus encoder, the zoo's GPT-2)
      boolean exact = constants <= 1 && !hasSquare;
      for (int r : recips) {
        exact &= uses.getOrDefault(g.op(r).inputs().get(1), 0) == 1;
      }
      return new Group(root, List.copyOf(members), Map.copyOf(inputs), Set.copyOf(recips),
          exact);
    }
  }

  /** Prefix of the {@code Square} the arithmetic optimizer makes of a {@code Mul(x, x)}. */
  static final String SQUARE_PREFIX = "ArithmeticOptimizer/ReplaceMulWithSquare_";

  /**
   * A tensor as grappler names it when it sorts inputs: {@code op} for output 0, else
   * {@code op:i}; a {@code Mul(x, x)} has become a {@code Square} under another name by then.
   */
  static String inputName(DataflowGraph g, TensorId t) {
    Op op = g.op(t.op());
    String name = square(op) ? SQUARE_PREFIX + op.name() : op.name();
    return t.output() == 0 ? name : name + ":" + t.output();
  }

  /** {@code Mul(x, x)}: a {@code Square} once the arithmetic optimizer has run. */
  static boolean square(Op op) {
    return op.type().equals("Mul") && op.inputs().size() == 2
        && op.inputs().get(0).equals(op.inputs().get(1));
  }

  private static Leaf second(Deque<Leaf> q) {
    var it = q.iterator();
    it.next();
    return it.next();
  }

  private record Leaf(TensorId tensor, String name, long elements, int member) {}

  static long elements(long[] shape) {
    long n = 1;
    for (long d : shape) {
      n *= Math.max(d, 0);
    }
    return n;
  }

  /** Numpy broadcasting of {@code in} to {@code out}. */
  static boolean broadcasts(long[] in, long[] out) {
    if (in.length > out.length) {
      return false;
    }
    for (int i = 1; i <= in.length; i++) {
      long a = in[in.length - i];
      long b = out[out.length - i];
      if (a != b && a != 1) {
        return false;
      }
    }
    return true;
  }
}
