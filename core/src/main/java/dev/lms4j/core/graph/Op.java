package dev.lms4j.core.graph;

import java.util.List;
import java.util.Objects;

/**
 * One operation of a {@link DataflowGraph}.
 *
 * @param id            dense id, the op's index in the graph
 * @param name          unique name
 * @param type          op type ({@code Conv2D}, {@code MatMul}, ...)
 * @param category      forward, backward or optimizer
 * @param device        requested device, may be empty
 * @param inputs        data inputs in order
 * @param controlInputs ids of ops this op must wait for
 * @param outputs       outputs in order
 */
public record Op(int id, String name, String type, OpCategory category, String device,
    List<TensorId> inputs, List<Integer> controlInputs, List<Tensor> outputs) {

  public Op {
    Objects.requireNonNull(name);
    Objects.requireNonNull(type);
    Objects.requireNonNull(category);
    device = device == null ? "" : device;
    inputs = List.copyOf(inputs);
    controlInputs = List.copyOf(controlInputs);
    outputs = List.copyOf(outputs);
  }

  /** The output tensor with this index. */
  public Tensor output(int i) {
    return outputs.get(i);
  }

  /** Total bytes of this op's non-persistent outputs. */
  public long transientOutputBytes() {
    long b = 0;
    for (Tensor t : outputs) {
      if (!t.persistent()) {
        b += t.bytes();
      }
    }
    return b;
  }
}
