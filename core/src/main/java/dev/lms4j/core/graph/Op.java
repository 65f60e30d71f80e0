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
 * @param scratch       bytes the kernel allocates while it runs beyond its outputs (workspace,
 *                      temporaries), as measured in a trace; {@link #SCRATCH_UNKNOWN} when not
 *                      measured: the graph then estimates it from the op's type and shapes
 *                      ({@link DataflowGraph#scratchBytes(int)})
 */
public record Op(int id, String name, String type, OpCategory category, String device,
    List<TensorId> inputs, List<Integer> controlInputs, List<Tensor> outputs, long scratch) {

  /** {@link #scratch()} of an op whose scratch was not measured. */
  public static final long SCRATCH_UNKNOWN = -1;

  public Op {
    Objects.requireNonNull(name);
    Objects.requireNonNull(type);
    Objects.requireNonNull(category);
    device = device == null ? "" : device;
    inputs = List.copyOf(inputs);
    controlInputs = List.copyOf(controlInputs);
    outputs = List.copyOf(outputs);
    if (scratch < SCRATCH_UNKNOWN) {
      throw new IllegalArgumentException("negative scratch for " + name + ": " + scratch);
    }
  }

  /** An op whose scratch is not measured ({@link #SCRATCH_UNKNOWN}). */
  public Op(int id, String name, String type, OpCategory category, String device,
      List<TensorId> inputs, List<Integer> controlInputs, List<Tensor> outputs) {
    this(id, name, type, category, device, inputs, controlInputs, outputs, SCRATCH_UNKNOWN);
  }

  /** This op with its scratch set to {@code bytes} (measured) or {@link #SCRATCH_UNKNOWN}. */
  public Op withScratch(long bytes) {
    return new Op(id, name, type, category, device, inputs, controlInputs, outputs, bytes);
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
