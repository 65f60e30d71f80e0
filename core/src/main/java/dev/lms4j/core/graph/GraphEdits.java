package dev.lms4j.core.graph;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** {@link DataflowGraph}'s edits: new graphs from replaced and added ops. */
final class GraphEdits {
  private GraphEdits() {}

  /** {@link DataflowGraph#withEdits}, on a graph's ops and name index. */
  static DataflowGraph apply(List<Op> ops, Map<String, Integer> byName, Map<Integer, Op> replaced,
      List<Op> added, boolean inPlaceReuse, boolean hostFeeds,
      java.util.Set<TensorId> fetched, GrapplerShapes grapplerShapes,
      java.util.Set<String> initShared) {
    List<Op> all = new ArrayList<>(ops.size() + added.size());
    for (Op op : ops) {
      Op r = replaced.get(op.id());
      if (r != null && (r.id() != op.id() || !r.name().equals(op.name()))) {
        throw new IllegalArgumentException("a replaced op must keep its id and name: " + r.name());
      }
      if (r != null && r.scratch() == Op.SCRATCH_UNKNOWN && r.type().equals(op.type())) {
        r = r.withScratch(op.scratch()); // same kernel, other edges: the same scratch
      }
      all.add(r == null ? op : r);
    }
    Map<String, Integer> names = new HashMap<>(byName);
    for (Op op : added) {
      if (op.id() != all.size()) {
        throw new IllegalArgumentException("added op " + op.name() + " must have id " + all.size());
      }
      if (names.put(op.name(), op.id()) != null) {
        throw new IllegalArgumentException("duplicate op name '" + op.name() + "'");
      }
      all.add(op);
    }
    for (Op op : all) {
      for (TensorId t : op.inputs()) {
        if (t.op() >= all.size() || t.output() >= all.get(t.op()).outputs().size()) {
          throw new IllegalArgumentException(op.name() + " reads a missing tensor " + t);
        }
      }
    }
    return new DataflowGraph(all, names, inPlaceReuse, hostFeeds, fetched, grapplerShapes,
        initShared);
  }

  /** {@link DataflowGraph#withScratch}. */
  static DataflowGraph withScratch(DataflowGraph g, Map<String, Integer> byName,
      Map<String, Long> byOpName) {
    Map<Integer, Op> replaced = new HashMap<>();
    for (Map.Entry<String, Long> e : new java.util.TreeMap<>(byOpName).entrySet()) {
      if (e.getValue() == null || e.getValue() < 0) {
        throw new IllegalArgumentException("scratch of " + e.getKey() + " must be >= 0, got "
            + e.getValue());
      }
      Integer id = byName.get(e.getKey());
      if (id != null) {
        replaced.put(id, g.op(id).withScratch(e.getValue()));
      }
    }
    return replaced.isEmpty() ? g : g.withEdits(replaced, List.of());
  }
}
