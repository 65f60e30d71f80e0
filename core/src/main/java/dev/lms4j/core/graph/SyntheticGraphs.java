package dev.lms4j.core.graph;

import java.util.ArrayList;
import java.util.List;

/** Synthetic training graphs for tests and planning benchmarks. */
public final class SyntheticGraphs {
  private SyntheticGraphs() {}

  /**
   * A chain-shaped training step of {@code layers} layers: a placeholder {@code x}, forward ops
   * {@code f1..fn} (each reads the previous activation and its weight {@code wi}), a loss, backward
   * ops {@code gradients/gn..g1} (each reads the incoming gradient and the forward activation
   * {@code f(i-1)}, as a ReluGrad or MatMul gradient does), weight gradients
   * {@code gradients/dwi} and updates {@code train/applyi}.
   *
   * <p>Memory, by hand: without LMS every activation is alive when the backward pass starts, so
   * the peak is about {@code weights + (layers + 2) * act}; with every forward activation swapped
   * it drops to a few activations plus the weights.
   *
   * @param layers      number of layers (ops are about {@code 5 * layers})
   * @param actBytes    bytes of each activation and gradient
   * @param weightBytes bytes of each weight
   */
  public static DataflowGraph trainingChain(int layers, long actBytes, long weightBytes) {
    DataflowGraphBuilder b = DataflowGraph.builder();
    long[] shape = {Math.max(1, actBytes / 4 / 16), 16};
    Tensor act = new Tensor("float32", shape, actBytes, false);
    b.op("x", "Placeholder", OpCategory.FORWARD, List.of(), act);
    String prev = "x";
    for (int i = 1; i <= layers; i++) {
      b.op("w" + i, "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(weightBytes));
      b.op("f" + i, "Relu", OpCategory.FORWARD, List.of(prev, "w" + i), act);
      prev = "f" + i;
    }
    b.op("loss", "Mean", OpCategory.FORWARD, List.of(prev), Tensor.ofBytes(4));
    b.op("gradients/g" + (layers + 1), "Fill", OpCategory.BACKWARD, List.of("loss"), act);
    String grad = "gradients/g" + (layers + 1);
    List<String> applies = new ArrayList<>();
    for (int i = layers; i >= 1; i--) {
      String input = i == 1 ? "x" : "f" + (i - 1);
      b.op("gradients/g" + i, "ReluGrad", OpCategory.BACKWARD, List.of(grad, input, "w" + i), act);
      b.op("gradients/dw" + i, "MatMul", OpCategory.BACKWARD, List.of(grad, input),
          new Tensor("float32", new long[] {Math.max(1, weightBytes / 4 / 16), 16}, weightBytes,
              false));
      b.op("train/apply" + i, "ApplyGradientDescent", OpCategory.OPTIMIZER,
          List.of("w" + i, "gradients/dw" + i), Tensor.persistent(weightBytes));
      applies.add("^train/apply" + i);
      grad = "gradients/g" + i;
    }
    b.op("train_op", "NoOp", OpCategory.OPTIMIZER, "", applies, List.of());
    return b.build();
  }
}
