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
 * An immutable dataflow graph: ops with typed, sized outputs, data edges and control edges.
 *
 * <p>Build one with {@link #builder()}; inputs are named as TensorFlow names them
 * ({@code "conv1"}, {@code "conv1:1"}, control inputs as {@code "^init"}) and may refer to ops
 * added later. {@link Builder#build()} rejects dangling names and cycles.
 *
 * <pre>{@code
 * DataflowGraph g = DataflowGraph.builder()
 *     .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(4096))
 *     .op("relu", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(4096))
 *     .build();
 * }</pre>
 */
public final class DataflowGraph {
  private final List<Op> ops;
  private final Map<String, Integer> byName;
  /** consumers[op][output] = ids of ops reading that output via a data edge (with repeats). */
  private final int[][][] consumers;
  private final int[][] controlSuccessors;
  private final int[] topoOrder;

  private DataflowGraph(List<Op> ops, Map<String, Integer> byName) {
    this.ops = Collections.unmodifiableList(ops);
    this.byName = Collections.unmodifiableMap(byName);
    int n = ops.size();
    List<List<List<Integer>>> cons = new ArrayList<>(n);
    List<List<Integer>> ctl = new ArrayList<>(n);
    for (Op op : ops) {
      List<List<Integer>> perOut = new ArrayList<>(op.outputs().size());
      for (int i = 0; i < op.outputs().size(); i++) {
        perOut.add(new ArrayList<>(2));
      }
      cons.add(perOut);
      ctl.add(new ArrayList<>(0));
    }
    for (Op op : ops) {
      for (TensorId in : op.inputs()) {
        cons.get(in.op()).get(in.output()).add(op.id());
      }
      for (int c : op.controlInputs()) {
        ctl.get(c).add(op.id());
      }
    }
    consumers = new int[n][][];
    controlSuccessors = new int[n][];
    for (int i = 0; i < n; i++) {
      List<List<Integer>> perOut = cons.get(i);
      consumers[i] = new int[perOut.size()][];
      for (int j = 0; j < perOut.size(); j++) {
        consumers[i][j] = perOut.get(j).stream().mapToInt(Integer::intValue).toArray();
      }
      controlSuccessors[i] = ctl.get(i).stream().mapToInt(Integer::intValue).toArray();
    }
    topoOrder = computeTopoOrder();
  }

  /** A new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** All ops, indexed by id. */
  public List<Op> ops() {
    return ops;
  }

  /** Number of ops. */
  public int size() {
    return ops.size();
  }

  /** The op with this id. */
  public Op op(int id) {
    return ops.get(id);
  }

  /** The op with this name, if any. */
  public Optional<Op> op(String name) {
    Integer id = byName.get(name);
    return id == null ? Optional.empty() : Optional.of(ops.get(id));
  }

  /** The op with this name; throws {@link IllegalArgumentException} naming it when absent. */
  public Op opOrThrow(String name) {
    return op(name).orElseThrow(() -> new IllegalArgumentException("no op named '" + name + "'"));
  }

  /** The tensor behind an id. */
  public Tensor tensor(TensorId t) {
    return ops.get(t.op()).output(t.output());
  }

  /** TensorFlow-style name of a tensor: {@code op:index}. */
  public String tensorName(TensorId t) {
    return ops.get(t.op()).name() + ":" + t.output();
  }

  /** Ids of the ops that read this tensor through data edges (an op reading it twice appears twice). */
  public int[] consumers(TensorId t) {
    return consumers[t.op()][t.output()].clone();
  }

  /** Number of data-edge reads of this tensor. */
  public int consumerCount(TensorId t) {
    return consumers[t.op()][t.output()].length;
  }

  /** Ids of the ops that have a control edge from this op. */
  public int[] controlSuccessors(int op) {
    return controlSuccessors[op].clone();
  }

  /** Number of data edges plus control edges. */
  public int edgeCount() {
    int e = 0;
    for (Op op : ops) {
      e += op.inputs().size() + op.controlInputs().size();
    }
    return e;
  }

  /** Ids of all successors (data and control), deduplicated, ascending. */
  public int[] successors(int op) {
    int[] all = concatConsumers(op);
    return Arrays.stream(all).distinct().sorted().toArray();
  }

  /** Ids of all predecessors (data and control), deduplicated, ascending. */
  public int[] predecessors(int op) {
    Op o = ops.get(op);
    int[] p = new int[o.inputs().size() + o.controlInputs().size()];
    int k = 0;
    for (TensorId t : o.inputs()) {
      p[k++] = t.op();
    }
    for (int c : o.controlInputs()) {
      p[k++] = c;
    }
    return Arrays.stream(p).distinct().sorted().toArray();
  }

  /** A topological order (Kahn's algorithm, smallest id first among ready ops). */
  public int[] topologicalOrder() {
    return topoOrder.clone();
  }

  /** Sum of the bytes of the variables (outputs of {@link OpTypes#VARIABLES} ops). */
  public long persistentBytes() {
    long b = 0;
    for (Op op : ops) {
      if (OpTypes.VARIABLES.contains(op.type())) {
        for (Tensor t : op.outputs()) {
          b += t.bytes();
        }
      }
    }
    return b;
  }

  /** True when the graph holds ops inserted by lms4j (name prefix {@link OpTypes#LMS_PREFIX}). */
  public boolean isRewritten() {
    for (Op op : ops) {
      if (op.name().startsWith(OpTypes.LMS_PREFIX)) {
        return true;
      }
    }
    return false;
  }

  /** A builder that copies this graph's ops, to which ops and edges can be added. */
  public Builder toBuilder() {
    Builder b = new Builder();
    for (Op op : ops) {
      List<String> ins = new ArrayList<>();
      for (TensorId t : op.inputs()) {
        ins.add(tensorName(t));
      }
      for (int c : op.controlInputs()) {
        ins.add("^" + ops.get(c).name());
      }
      b.op(op.name(), op.type(), op.category(), op.device(), ins, op.outputs());
    }
    return b;
  }

  private int[] concatConsumers(int op) {
    int n = controlSuccessors[op].length;
    for (int[] c : consumers[op]) {
      n += c.length;
    }
    int[] all = new int[n];
    int k = 0;
    for (int[] c : consumers[op]) {
      System.arraycopy(c, 0, all, k, c.length);
      k += c.length;
    }
    System.arraycopy(controlSuccessors[op], 0, all, k, controlSuccessors[op].length);
    return all;
  }

  private int[] computeTopoOrder() {
    int n = ops.size();
    int[] indeg = new int[n];
    for (int i = 0; i < n; i++) {
      indeg[i] = predecessors(i).length;
    }
    java.util.PriorityQueue<Integer> ready = new java.util.PriorityQueue<>();
    for (int i = 0; i < n; i++) {
      if (indeg[i] == 0) {
        ready.add(i);
      }
    }
    int[] order = new int[n];
    int k = 0;
    while (!ready.isEmpty()) {
      int v = ready.poll();
      order[k++] = v;
      for (int s : successors(v)) {
        if (--indeg[s] == 0) {
          ready.add(s);
        }
      }
    }
    if (k != n) {
      List<String> stuck = new ArrayList<>();
      for (int i = 0; i < n && stuck.size() < 5; i++) {
        if (indeg[i] > 0) {
          stuck.add(ops.get(i).name());
        }
      }
      throw new IllegalArgumentException("graph has a cycle through " + stuck);
    }
    return order;
  }

  /** Builds a {@link DataflowGraph}; ops keep the order in which they were added. */
  public static final class Builder {
    private record Pending(String name, String type, OpCategory category, String device,
        List<String> inputs, List<Tensor> outputs) {}

    private final LinkedHashMap<String, Pending> pending = new LinkedHashMap<>();

    private Builder() {}

    /** Adds an op with one output tensor. */
    public Builder op(String name, String type, OpCategory category, List<String> inputs,
        Tensor output) {
      return op(name, type, category, "", inputs, List.of(output));
    }

    /**
     * Adds an op.
     *
     * @param inputs data inputs as {@code "op"} or {@code "op:i"}; control inputs as {@code "^op"}
     */
    public Builder op(String name, String type, OpCategory category, String device,
        List<String> inputs, List<Tensor> outputs) {
      if (pending.containsKey(name)) {
        throw new IllegalArgumentException("duplicate op name '" + name + "'");
      }
      pending.put(name, new Pending(name, type, category, device, List.copyOf(inputs),
          List.copyOf(outputs)));
      return this;
    }

    /** True when an op with this name was added. */
    public boolean has(String name) {
      return pending.containsKey(name);
    }

    /** Adds a control edge {@code from -> to} between ops already added. */
    public Builder controlEdge(String from, String to) {
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
    public Builder replaceInput(String op, int index, String newInput) {
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
            int colon = in.lastIndexOf(':');
            String opName = colon < 0 ? in : in.substring(0, colon);
            int idx = colon < 0 ? 0 : Integer.parseInt(in.substring(colon + 1));
            int src = resolve(ids, opName, p.name());
            int outs = pending.get(opName).outputs().size();
            if (idx >= outs) {
              throw new IllegalArgumentException(p.name() + " reads output " + idx + " of "
                  + opName + ", which has " + outs + " outputs");
            }
            data.add(new TensorId(src, idx));
          }
        }
        ops.add(new Op(ids.get(p.name()), p.name(), p.type(), p.category(), p.device(), data,
            ctl.stream().distinct().toList(), p.outputs()));
      }
      return new DataflowGraph(ops, ids);
    }

    private static int resolve(Map<String, Integer> ids, String name, String user) {
      Integer id = ids.get(name);
      if (id == null) {
        throw new IllegalArgumentException(user + " reads unknown op '" + name + "'");
      }
      return id;
    }
  }
}
