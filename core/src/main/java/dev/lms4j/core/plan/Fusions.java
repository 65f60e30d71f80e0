package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import java.util.Arrays;
import java.util.Set;

/**
 * Chains TensorFlow runs as one fused kernel on the CPU (grappler's remapper and the oneDNN
 * passes): a convolution, then a bias add, batch norm or add, then an activation
 * ({@code _FusedConv2D}, {@code _FusedBatchNormEx}, ...); a {@code MatMul}, a bias add and a
 * sigmoid, tanh or elu ({@code _MklNativeFusedMatMul}). A fused kernel rounds differently from
 * the unfused ops, so a rewrite must neither break such a chain in the original graph (a
 * swap-out or a clone reading its middle tensor gives it a second reader and the fusion no
 * longer happens) nor recompute its middle op alone (the clone runs unfused). Measured: resnet-6's
 * fifth loss moved by 4e-7 relative when a swap read a conv's bias-add output, and ResNet-101's
 * third loss moved in the 7th digit when XLA-style remat recomputed batch norms on their own;
 * both bit-identical with {@code TF_ENABLE_ONEDNN_OPTS=0} or with these guards. A conv's bias
 * add or batch norm whose output a backward op reads as well (the C++ {@code ReluGrad} of
 * TensorFlow Java's gradients reads the ReLU's input) is not guarded for swapping: the activation
 * fuses only into a middle op with one reader. Measured with oneDNN on (Intel Xeon, 2026-12-06):
 * swap plans reading them kept every loss bit for bit (the corpus DenseNet's seven bias adds, 3
 * steps; the zoo's resnet-6, its conv1 bias adds, 5 steps; ResNet-50 batch 8, its batch norms,
 * 4 steps), and the hybrid planner reached TFLMS's 21 MiB on that DenseNet (29 without them).
 * A batch norm is still never recomputed apart from its activation ({@link #fusedBatchNorm}).
 */
final class Fusions {
  /**
   * Convolutions, whose output the fusion passes join with a following bias add and activation.
   */
  private static final Set<String> PRODUCERS = Set.of("Conv2D", "Conv3D",
      "DepthwiseConv2dNative");
  private static final Set<String> MIDDLE = Set.of("BiasAdd", "FusedBatchNorm",
      "FusedBatchNormV3", "AddV2", "Add");
  private static final Set<String> BATCH_NORMS = Set.of("FusedBatchNorm", "FusedBatchNormV3");
  private static final Set<String> ACTIVATIONS = Set.of("Relu", "Relu6", "Elu", "LeakyRelu",
      "Sigmoid", "Tanh");
  /** The activations a batch norm fuses with ({@code _FusedBatchNormEx}). */
  private static final Set<String> BATCH_NORM_ACTIVATIONS = Set.of("Relu", "Relu6", "Elu",
      "LeakyRelu");
  /**
   * Activations whose fused form rounds differently from TensorFlow's own kernel: oneDNN's
   * sigmoid, tanh and elu are other approximations than Eigen's. A {@code MatMul} + bias add +
   * one of these is {@code _MklNativeFusedMatMul} in the original graph (measured on the corpus
   * gru: with auto's plan reading the bias add's output, the sigmoid ran unfused and the first
   * loss moved, 2.314537286758423 vs 2.3145368099212646). MatMul chains ending in a ReLU fuse
   * too, but a ReLU is exact, so swapping their bias-add outputs keeps losses bit-identical (the
   * MLP's swap-only plans need those tensors).
   */
  private static final Set<String> INEXACT_ACTIVATIONS = Set.of("Elu", "Sigmoid", "Tanh");

  private Fusions() {}

  /**
   * Whether {@code t} is the middle of a convolution + (bias add | batch norm | add) +
   * activation chain, or of a {@code MatMul} + bias add + inexact activation chain: produced by
   * a middle op reading a convolution (a MatMul), read in the forward pass by the activation
   * alone.
   */
  public static boolean intermediate(DataflowGraph g, TensorId t) {
    Op prod = g.op(t.op());
    if (!MIDDLE.contains(prod.type()) || prod.inputs().isEmpty()) {
      return false;
    }
    String first = g.op(prod.inputs().get(0).op()).type();
    if (PRODUCERS.contains(first)) {
      // a conv's bias add or batch norm that the backward pass reads too (TensorFlow's C++
      // ReluGrad reads the ReLU's input) has two readers, so the activation is not fused into
      // it: swapping its output keeps the kernels (measured below); an add keeps the guard
      return onlyReadByActivation(g, t, ACTIVATIONS, !prod.type().startsWith("Add"));
    }
    return first.equals("MatMul") && prod.type().equals("BiasAdd")
        && onlyReadByActivation(g, t, INEXACT_ACTIVATIONS, false);
  }

  /**
   * Whether {@code op} is a batch norm that runs fused with the activation after it
   * ({@code _FusedBatchNormEx}): recomputed alone, the clone would run unfused and its outputs
   * (the normalised tensor and the saved statistics the gradient reads) would round differently.
   */
  public static boolean fusedBatchNorm(DataflowGraph g, Op op) {
    return BATCH_NORMS.contains(op.type()) && !op.outputs().isEmpty()
        && onlyReadByActivation(g, new TensorId(op.id(), 0), BATCH_NORM_ACTIVATIONS, false);
  }

  /** Whether a clone of {@code op} (reading its inputs) or {@code op} itself would break one. */
  public static boolean unsafeToRecompute(DataflowGraph g, Op op) {
    if (fusedBatchNorm(g, op)) {
      return true;
    }
    for (TensorId in : op.inputs()) {
      if (intermediate(g, in)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether the forward pass reads {@code t} with one of {@code activations} alone; with
   * {@code alone}, no backward op reads it either.
   */
  private static boolean onlyReadByActivation(DataflowGraph g, TensorId t,
      Set<String> activations, boolean alone) {
    int forward = 0;
    int others = 0;
    boolean activation = false;
    for (int c : Arrays.stream(g.consumers(t)).distinct().toArray()) {
      Op co = g.op(c);
      if (OpTypes.SHAPE_ONLY.contains(co.type())) {
        continue;
      }
      if (co.category() == OpCategory.FORWARD) {
        forward++;
        activation |= activations.contains(co.type());
      } else {
        others++;
      }
    }
    return forward == 1 && activation && (!alone || others == 0);
  }
}
