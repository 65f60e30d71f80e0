package dev.lms4j.core.graph;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Builds a {@link DataflowGraph}; ops keep the order in which they were added.
 *
 * <pre>{@code
 * DataflowGraph g = DataflowGraph.builder().op("x", "Placeholder", OpCategory.FORWARD,
 *     List.of(), Tensor.ofBytes(4096)).build();
 * }</pre>
 */
public final class DataflowGraphBuilder {
  private record Pending(String name, String type, OpCategory category, String device,
      List<String> inputs, List<Tensor> outputs) {}

  private final LinkedHashMap<String, Pending> pending = new LinkedHashMap<>();
  private final Map<String, Long> scratch = new HashMap<>();

  private boolean inPlaceReuse;
  private boolean hostFeeds;
  private final java.util.Set<String> fetched = new java.util.LinkedHashSet<>();
  private GrapplerShapes grapplerShapes;
  private java.util.Set<String> initShared = java.util.Set.of();

  DataflowGraphBuilder() {}

  /**
   * Whether the graph's kernels reuse input buffers in place as TensorFlow's do
   * ({@link DataflowGraph#inPlaceReuse()}); off by default.
   */
  public DataflowGraphBuilder inPlaceReuse(boolean on) {
    this.inPlaceReuse = on;
    return this;
  }

  /**
   * Whether fed tensors live outside the device's memory ({@link DataflowGraph#hostFeeds()});
   * off by default: a feed counts as resident device memory.
   */
  public DataflowGraphBuilder hostFeeds(boolean on) {
    this.hostFeeds = on;
    return this;
  }

  /**
   * Marks a tensor a step fetches ({@code "op"} for its output 0, or {@code "op:i"}): the
   * session holds it until the step ends ({@link DataflowGraph#fetched()}). The op must be added
   * by the time the graph is built.
   */
  public DataflowGraphBuilder fetch(String tensor) {
    fetched.add(tensor);
    return this;
  }

  /**
   * What grappler's shape inference knows of the graph ({@link DataflowGraph#grapplerShapes()});
   * null (the default): not known.
   */
  public DataflowGraphBuilder grapplerShapes(GrapplerShapes shapes) {
    this.grapplerShapes = shapes;
    return this;
  }

  /**
   * The residents whose buffer init shares with a held constant
   * ({@link DataflowGraph#initShared()}), by op name; none by default.
   */
  public DataflowGraphBuilder initShared(java.util.Set<String> opNames) {
    this.initShared = java.util.Set.copyOf(opNames);
    return this;
  }

  /**
   * As {@link #grapplerShapes}, saying only which shape reads grappler leaves to the step
   * ({@link DataflowGraph#dynamicShapeReads()}), by op name, every tensor's shape known.
   */
  public DataflowGraphBuilder dynamicShapeReads(java.util.Set<String> opNames) {
    return grapplerShapes(new GrapplerShapes(opNames, java.util.Set.of()));
  }

  /** Adds an op with one output tensor. */
  public DataflowGraphBuilder op(String name, String type, OpCategory category, List<String> inputs,
      Tensor output) {
    return op(name, type, category, "", inputs, List.of(output));
  }

  /**
   * Adds an op.
   *
   * @param inputs data inputs as {@code "op"} or {@code "op:i"}; control inputs as {@code "^op"}
   */
  public DataflowGraphBuilder op(String name, String type, OpCategory category, String device,
      List<String> inputs, List<Tensor> outputs) {
    if (pending.containsKey(name)) {
      throw new IllegalArgumentException("duplicate op name '" + name + "'");
    }
    pending.put(name, new Pending(name, type, category, device, List.copyOf(inputs),
        List.copyOf(outputs)));
    return this;
  }

  /**
   * Sets the measured kernel scratch of an op already added ({@link Op#scratch()}); ops without
   * one get {@link Op#SCRATCH_UNKNOWN}, which the graph estimates.
   */
  public DataflowGraphBuilder scratch(String op, long bytes) {
    if (!pending.containsKey(op)) {
      throw new IllegalArgumentException("scratch for unknown op '" + op + "'");
    }
    if (bytes < Op.SCRATCH_UNKNOWN) {
      throw new IllegalArgumentException("negative scratch for " + op + ": " + bytes);
    }
    scratch.put(op, bytes);
    return this;
  }

  /** True when an op with this name was added. */
  public boolean has(String name) {
    return pending.containsKey(name);
  }

  /** Adds a control edge {@code from -> to} between ops already added. */
  public DataflowGraphBuilder controlEdge(String from, String to) {
    Pending p = pending.get(to);
    if (p == null || !pending.containsKey(from)) {
      throw new IllegalArgumentException("control edge between unknown ops " + from + " -> " + to);
    }
    String ref = "^" + from;
    if (!p.inputs().contains(ref)) {
      List<String> ins = new ArrayList<>(p.inputs());
      ins.add(ref);
      pending.put(to, new Pending(p.name(), p.type(), p.category(), p.device(), ins, p.outputs()));
    }
    return this;
  }

  /** Replaces data input number {@code index} of op {@code op} with {@code newInput}. */
  public DataflowGraphBuilder replaceInput(String op, int index, String newInput) {
    Pending p = pending.get(op);
    List<String> ins = new ArrayList<>(p.inputs());
    int k = -1;
    for (int i = 0; i < ins.size(); i++) {
      if (!ins.get(i).startsWith("^") && ++k == index) {
        ins.set(i, newInput);
        pending.put(op, new Pending(p.name(), p.type(), p.category(), p.device(), ins,
            p.outputs()));
        return this;
      }
    }
    throw new IllegalArgumentException(op + " has no data input " + index);
  }

  /** Resolves names, checks for cycles and returns the graph. */
  public DataflowGraph build() {
    Map<String, Integer> ids = new HashMap<>(pending.size() * 2);
    int next = 0;
    for (String name : pending.keySet()) {
      ids.put(name, next++);
    }
    List<Op> ops = new ArrayList<>(pending.size());
    for (Pending p : pending.values()) {
      List<TensorId> data = new ArrayList<>();
      List<Integer> ctl = new ArrayList<>();
      for (String in : p.inputs()) {
        if (in.startsWith("^")) {
          ctl.add(resolve(ids, in.substring(1), p.name()));
        } else {
          data.add(tensor(ids, in, p.name()));
        }
      }
      ops.add(new Op(ids.get(p.name()), p.name(), p.type(), p.category(), p.device(), data,
          ctl.stream().distinct().toList(), p.outputs(),
          scratch.getOrDefault(p.name(), Op.SCRATCH_UNKNOWN)));
    }
    java.util.Set<TensorId> fetches = new java.util.LinkedHashSet<>();
    for (String f : fetched) {
      fetches.add(tensor(ids, f, "the fetch " + f));
    }
    return new DataflowGraph(ops, ids, inPlaceReuse, hostFeeds, fetches, grapplerShapes,
        initShared);
  }

  /**
   * The tensor {@code ref} names ({@code "op"} for output 0, or {@code "op:i"}); {@code user}
   * (who reads it) names it in an error.
   */
  private TensorId tensor(Map<String, Integer> ids, String ref, String user) {
    int colon = ref.lastIndexOf(':');
    String opName = colon < 0 ? ref : ref.substring(0, colon);
    int idx = colon < 0 ? 0 : Integer.parseInt(ref.substring(colon + 1));
    int src = resolve(ids, opName, user);
    int outs = pending.get(opName).outputs().size();
    if (idx >= outs) {
      throw new IllegalArgumentException(user + " reads output " + idx + " of " + opName
          + ", which has " + outs + " outputs");
    }
    return new TensorId(src, idx);
  }

  private static int resolve(Map<String, Integer> ids, String name, String user) {
    Integer id = ids.get(name);
    if (id == null) {
      throw new IllegalArgumentException(user + " reads unknown op '" + name + "'");
    }
    return id;
  }
}
