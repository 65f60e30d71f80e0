package dev.lms4j.tf;

import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorShapeProto;

/**
 * What resource variables hold, for the graph model. TensorFlow types a {@code VarHandleOp}'s
 * output as a {@code resource} scalar; the variable's data lives behind it. Measured here (TF Java
 * 1.1, BFC allocator, traced steps on a 64 MiB {@code [4096, 4096]} variable):
 *
 * <ul>
 *   <li>The variable's data is resident for the whole step, as a {@code VariableV2}'s: the
 *       handle's tensor is given the variable's bytes (dtype and shape attributes) and is
 *       persistent, so it counts as a learning parameter and is never swapped.</li>
 *   <li>{@code ReadVariableOp} allocates nothing: its output shares the variable's buffer.</li>
 *   <li>A {@code ResourceApply*} (or {@code ResourceScatter*}, {@code AssignVariableOp}) that
 *       runs while a read of the variable is still alive copies the variable first
 *       (copy-on-write): the update allocated 64 MiB, and the old buffer stayed allocated until
 *       the read's last reader ran (bytes in use 192 MiB at the update and 128 MiB at that
 *       reader, against 128 MiB for the whole step when the read was dead by the update). A
 *       {@code VariableV2} updated by {@code ApplyGradientDescent} with the same late reader was
 *       updated in place (128 MiB).</li>
 * </ul>
 *
 * So a read is an alias (persistent, no bytes of its own) when every reader of it is an ancestor
 * of every update of its variable in the step; otherwise the read is modelled as holding a
 * buffer of the variable's size from the read to its last reader (transient): that covers the
 * copy-on-write from the update on, and over-counts the stretch before the update, so a plan
 * built on it errs on the safe side.
 */
final class ResourceVariables {
  private final Map<String, Long> varBytes = new HashMap<>();
  private final Set<String> copyOnWrite = new HashSet<>();

  private ResourceVariables() {}

  /**
   * The resource variables of {@code gd} and which of their reads may see a copy-on-write.
   *
   * @param keep the ops the model keeps, or null for all
   */
  static ResourceVariables of(GraphDef gd, Set<String> keep) {
    ResourceVariables r = new ResourceVariables();
    Map<String, NodeDef> byName = new HashMap<>();
    Map<String, List<String>> readers = new HashMap<>();
    Map<String, List<String>> writers = new HashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      if (keep != null && !keep.contains(n.getName())) {
        continue;
      }
      byName.put(n.getName(), n);
      if (n.getOp().equals("VarHandleOp")) {
        r.varBytes.put(n.getName(), bytes(n));
      }
    }
    for (NodeDef n : byName.values()) {
      for (String in : n.getInputList()) {
        if (!in.startsWith("^")) {
          readers.computeIfAbsent(GraphImporter.opName(in), k -> new ArrayList<>())
              .add(n.getName());
        }
      }
      if (OpTypes.isVariableWriter(n.getOp()) && n.getInputCount() > 0) {
        writers.computeIfAbsent(GraphImporter.opName(n.getInput(0)), k -> new ArrayList<>())
            .add(n.getName());
      }
    }
    Map<String, Set<String>> ancestorsOf = new HashMap<>();
    for (NodeDef n : byName.values()) {
      if (!n.getOp().equals("ReadVariableOp") || n.getInputCount() == 0) {
        continue;
      }
      String handle = GraphImporter.opName(n.getInput(0));
      for (String w : writers.getOrDefault(handle, List.of())) {
        Set<String> before = ancestorsOf.computeIfAbsent(w, k -> ancestors(byName, k));
        boolean alive = !before.contains(n.getName());
        for (String reader : readers.getOrDefault(n.getName(), List.of())) {
          alive |= !before.contains(reader);
        }
        if (alive) {
          r.copyOnWrite.add(n.getName());
          break;
        }
      }
    }
    return r;
  }

  /** {@code t}, output {@code index} of {@code n}, with the sizes above. */
  Tensor adjust(NodeDef n, int index, Tensor t) {
    if (n.getOp().equals("VarHandleOp")) {
      return new Tensor(t.dtype(), shape(n), varBytes.getOrDefault(n.getName(), 0L), true);
    }
    if (n.getOp().equals("ReadVariableOp") && index == 0 && n.getInputCount() > 0
        && varBytes.containsKey(GraphImporter.opName(n.getInput(0)))) {
      boolean cow = copyOnWrite.contains(n.getName());
      return new Tensor(t.dtype(), t.shape(), t.bytes(), !cow);
    }
    return t;
  }

  /** The names of the reads modelled as copy-on-write, for tests and logs. */
  Set<String> copyOnWriteReads() {
    return Set.copyOf(copyOnWrite);
  }

  private static Set<String> ancestors(Map<String, NodeDef> byName, String root) {
    Set<String> seen = new HashSet<>();
    ArrayDeque<String> todo = new ArrayDeque<>();
    todo.add(root);
    while (!todo.isEmpty()) {
      NodeDef v = byName.get(todo.poll());
      if (v == null) {
        continue;
      }
      for (String in : v.getInputList()) {
        String op = GraphImporter.opName(in);
        if (seen.add(op)) {
          todo.add(op);
        }
      }
    }
    return seen;
  }

  private static long[] shape(NodeDef n) {
    AttrValue a = n.getAttrOrDefault("shape", null);
    if (a == null || a.getShape().getUnknownRank()) {
      return new long[0];
    }
    TensorShapeProto s = a.getShape();
    long[] dims = new long[s.getDimCount()];
    for (int i = 0; i < dims.length; i++) {
      dims[i] = Math.max(0, s.getDim(i).getSize());
    }
    return dims;
  }

  private static long bytes(NodeDef n) {
    AttrValue dt = n.getAttrOrDefault("dtype", null);
    long per = dt == null ? 4 : GraphImporter.dtypeSize(dt.getType() == DataType.UNRECOGNIZED
        ? DataType.DT_FLOAT : dt.getType());
    long elems = 1;
    for (long d : shape(n)) {
      elems *= d;
    }
    return elems * per;
  }
}
