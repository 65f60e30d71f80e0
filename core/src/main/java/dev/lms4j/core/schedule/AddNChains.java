package dev.lms4j.core.schedule;

import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * The AddN rewrite of grappler's scheduling pass, on the graph model. An {@code AddN} (or
 * {@code AccumulateNV2}) with more than two inputs keeps every input alive until the last one
 * arrives. Rewritten as a chain of pairwise {@code AddV2}s in the order its inputs are produced,
 * each input is added, and can be freed, as soon as it and its predecessor exist. The last add
 * keeps the AddN's name (its readers are unchanged); the others are named
 * {@code lms4j/addn/<name>/add_<i>}. (Grappler accumulates into a temporary variable instead;
 * a chain needs no variable and no {@code Assign}.)
 *
 * <pre>{@code
 * List<AddNChains.Chain> chains = AddNChains.plan(graph, Levels.of(graph).schedule());
 * DataflowGraph chained = AddNChains.apply(graph, chains);
 * Schedulers.Choice c = Schedulers.best(chained);   // schedule the chained graph
 * }</pre>
 *
 * The sum is the same up to float rounding: the additions happen in another order.
 */
public final class AddNChains {
  /** Op types that are rewritten. */
  public static final Set<String> TYPES = Set.of("AddN", "AccumulateNV2");

  private static final Set<String> NOT_ADDABLE = Set.of("string", "variant", "resource", "bool");

  private AddNChains() {}

  /**
   * One AddN and the order its inputs are added in.
   *
   * @param op     the AddN's name (the last add keeps it)
   * @param inputs its data inputs as tensor names ({@code op:i}), in the order they are added
   */
  public record Chain(String op, List<String> inputs) {
    /** Copies the list. */
    public Chain {
      Objects.requireNonNull(op);
      inputs = List.copyOf(inputs);
      if (inputs.size() < 3) {
        throw new IllegalArgumentException("a chain needs 3 or more inputs: " + op);
      }
    }

    /** Names of the adds, first to last; the last is {@link #op()}. */
    public List<String> adds() {
      List<String> names = new ArrayList<>();
      for (int i = 1; i < inputs.size() - 1; i++) {
        names.add(addName(op, i));
      }
      names.add(op);
      return names;
    }
  }

  /** Name of the {@code i}-th add (from 1) of the chain that replaces {@code op}. */
  public static String addName(String op, int i) {
    return OpTypes.LMS_PREFIX + "addn/" + op + "/add_" + i;
  }

  /**
   * The chains for every AddN / AccumulateNV2 of {@code g} with more than two data inputs of an
   * addable dtype, inputs sorted by when {@code order} produces them (the same tensor or outputs
   * of one op keep their input order). Chains come in op id order.
   *
   * @param order a schedule of {@code g} (the levelled one, or a scheduler's)
   */
  public static List<Chain> plan(DataflowGraph g, int[] order) {
    if (order.length != g.size()) {
      throw new IllegalArgumentException("order has " + order.length + " ops, graph "
          + g.size());
    }
    int[] pos = new int[g.size()];
    for (int i = 0; i < order.length; i++) {
      pos[order[i]] = i;
    }
    List<Chain> out = new ArrayList<>();
    for (Op op : g.ops()) {
      if (!TYPES.contains(op.type()) || op.inputs().size() < 3 || op.outputs().size() != 1
          || NOT_ADDABLE.contains(op.output(0).dtype())) {
        continue;
      }
      List<Integer> idx = new ArrayList<>();
      for (int i = 0; i < op.inputs().size(); i++) {
        idx.add(i);
      }
      List<TensorId> ins = op.inputs();
      idx.sort(Comparator.<Integer>comparingInt(i -> pos[ins.get(i).op()])
          .thenComparingInt(i -> ins.get(i).output()).thenComparingInt(i -> i));
      out.add(new Chain(op.name(), idx.stream().map(i -> g.tensorName(ins.get(i))).toList()));
    }
    return out;
  }

  /**
   * A new graph with each chained op replaced by its adds ({@code AddV2}, same category, device
   * and output tensor as the AddN; the first add takes over the AddN's control inputs).
   *
   * @throws IllegalArgumentException when a chain names an unknown op, or inputs that are not
   *                                  the op's inputs
   */
  public static DataflowGraph apply(DataflowGraph g, List<Chain> chains) {
    Map<Integer, Op> replaced = new HashMap<>();
    List<Op> added = new ArrayList<>();
    int next = g.size();
    for (Chain c : chains) {
      Op op = g.opOrThrow(c.op());
      List<TensorId> ins = new ArrayList<>();
      for (String t : c.inputs()) {
        ins.add(tensorId(g, t));
      }
      if (!sortedNames(g, op.inputs()).equals(sortedNames(g, ins))) {
        throw new IllegalArgumentException("chain of " + c.op() + " lists " + c.inputs()
            + ", not the op's inputs");
      }
      TensorId acc = null;
      List<Integer> ctl = op.controlInputs();
      for (int i = 1; i < ins.size() - 1; i++) {
        List<TensorId> pair = List.of(acc == null ? ins.get(0) : acc, ins.get(i));
        added.add(new Op(next, addName(op.name(), i), "AddV2", op.category(), op.device(), pair,
            i == 1 ? ctl : List.of(), op.outputs()));
        acc = new TensorId(next++, 0);
      }
      replaced.put(op.id(), new Op(op.id(), op.name(), "AddV2", op.category(), op.device(),
          List.of(acc, ins.get(ins.size() - 1)), List.of(), op.outputs()));
    }
    return g.withEdits(replaced, added);
  }

  private static List<String> sortedNames(DataflowGraph g, List<TensorId> ts) {
    return ts.stream().map(g::tensorName).sorted().toList();
  }

  private static TensorId tensorId(DataflowGraph g, String name) {
    int colon = name.lastIndexOf(':');
    String op = colon < 0 ? name : name.substring(0, colon);
    int idx = colon < 0 ? 0 : Integer.parseInt(name.substring(colon + 1));
    return new TensorId(g.opOrThrow(op).id(), idx);
  }
}
