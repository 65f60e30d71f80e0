package dev.lms4j.core.plan;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Fusions} directly, on hand-built graphs: which tensors are the middle of a
 * conv + (bias add | batch norm | add) + activation chain that oneDNN fuses, which batch norms
 * run fused with their activation, and which ops are unsafe to recompute because of either.
 */
class FusionsTest {
  private static final long KB = 1024;

  /**
   * x, w, b; conv = Conv2D(x, w); mid = {@code middle}(conv, b); act = {@code activation}(mid);
   * plus {@code extra} forward readers of mid, and the activation's gradient reading act.
   */
  private static DataflowGraph chain(String producer, String middle, String activation,
      String... extraForwardReaders) {
    return chain(false, producer, middle, activation, extraForwardReaders);
  }

  /** As above; with {@code gradientReadsMid} the gradient reads mid as well (C++ ReluGrad). */
  private static DataflowGraph chain(boolean gradientReadsMid, String producer, String middle,
      String activation, String... extraForwardReaders) {
    DataflowGraphBuilder b = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(4 * KB))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("b", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("conv", producer, OpCategory.FORWARD, List.of("x", "w"), Tensor.ofBytes(4 * KB))
        .op("mid", middle, OpCategory.FORWARD, List.of("conv", "b"), Tensor.ofBytes(4 * KB))
        .op("act", activation, OpCategory.FORWARD, List.of("mid"), Tensor.ofBytes(4 * KB))
        // shape-only readers do not break a fusion
        .op("shape", "Shape", OpCategory.FORWARD, List.of("mid"), Tensor.ofBytes(16));
    for (String e : extraForwardReaders) {
      b.op(e, "Identity", OpCategory.FORWARD, List.of("mid"), Tensor.ofBytes(4 * KB));
    }
    return b.op("loss", "Mean", OpCategory.FORWARD, List.of("act"), Tensor.ofBytes(4))
        .op("gradients/g", "ReluGrad", OpCategory.BACKWARD,
            gradientReadsMid ? List.of("act", "mid") : List.of("act", "act"),
            Tensor.ofBytes(4 * KB))
        .op("gradients/cg", "Conv2DBackpropFilter", OpCategory.BACKWARD,
            List.of("x", "gradients/g"), Tensor.ofBytes(KB))
        .build();
  }

  private static TensorId out(DataflowGraph g, String op) {
    return new TensorId(g.opOrThrow(op).id(), 0);
  }

  @Test
  void theMiddleOfAConvChainIsAnIntermediate() {
    for (String producer : List.of("Conv2D", "Conv3D", "DepthwiseConv2dNative")) {
      for (String middle : List.of("BiasAdd", "FusedBatchNorm", "FusedBatchNormV3", "AddV2",
          "Add")) {
        for (String act : List.of("Relu", "Relu6", "Elu", "LeakyRelu", "Sigmoid", "Tanh")) {
          DataflowGraph g = chain(producer, middle, act);
          String c = producer + " " + middle + " " + act;
          assertThat(Fusions.intermediate(g, out(g, "mid"))).as(c).isTrue();
          // the conv's own output and the activation's are not
          assertThat(Fusions.intermediate(g, out(g, "conv"))).as(c).isFalse();
          assertThat(Fusions.intermediate(g, out(g, "act"))).as(c).isFalse();
          // the activation reads the middle: recomputing it would break the chain
          assertThat(Fusions.unsafeToRecompute(g, g.opOrThrow("act"))).as(c).isTrue();
          assertThat(Fusions.unsafeToRecompute(g, g.opOrThrow("conv"))).as(c).isFalse();
        }
      }
    }
  }

  @Test
  void noFusionWithoutAConvolutionAnActivationOrWithASecondForwardReader() {
    // a MatMul chain ending in an exact activation (ReLU) rounds the same fused or not
    assertThat(Fusions.intermediate(chain("MatMul", "BiasAdd", "Relu"),
        out(chain("MatMul", "BiasAdd", "Relu"), "mid"))).isFalse();
    // a MatMul's other middle ops are not fused with an activation
    DataflowGraph add = chain("MatMul", "AddV2", "Sigmoid");
    assertThat(Fusions.intermediate(add, out(add, "mid"))).isFalse();
    // an activation that is not fused
    DataflowGraph sq = chain("Conv2D", "BiasAdd", "Square");
    assertThat(Fusions.intermediate(sq, out(sq, "mid"))).isFalse();
    // Mul is not a middle op
    DataflowGraph mul = chain("Conv2D", "Mul", "Relu");
    assertThat(Fusions.intermediate(mul, out(mul, "mid"))).isFalse();
    // a second forward reader already breaks the fusion: nothing to protect
    DataflowGraph two = chain("Conv2D", "BiasAdd", "Relu", "other");
    assertThat(Fusions.intermediate(two, out(two, "mid"))).isFalse();
    assertThat(Fusions.unsafeToRecompute(two, two.opOrThrow("act"))).isFalse();
  }

  /**
   * A conv's bias add or batch norm that a backward op reads too (TensorFlow Java's ReluGrad
   * reads the ReLU's input) has two readers in the graph as given, so the activation is not
   * fused into it: not an intermediate, and a swap may read it. An add middle and MatMul chains
   * keep the guard whatever the backward pass reads, and a batch norm is still not recomputed
   * apart from its activation.
   */
  @Test
  void aConvBiasAddOrBatchNormTheBackwardPassReadsIsNotAnIntermediate() {
    for (String middle : List.of("BiasAdd", "FusedBatchNorm", "FusedBatchNormV3")) {
      for (String act : List.of("Relu", "Relu6", "Elu", "Tanh")) {
        DataflowGraph g = chain(true, "Conv2D", middle, act);
        assertThat(Fusions.intermediate(g, out(g, "mid"))).as(middle + " " + act).isFalse();
      }
    }
    DataflowGraph bias = chain(true, "Conv2D", "BiasAdd", "Relu");
    assertThat(Fusions.unsafeToRecompute(bias, bias.opOrThrow("act"))).isFalse();
    for (String middle : List.of("AddV2", "Add")) {
      DataflowGraph g = chain(true, "Conv2D", middle, "Relu");
      assertThat(Fusions.intermediate(g, out(g, "mid"))).as(middle).isTrue();
    }
    DataflowGraph bn = chain(true, "Conv2D", "FusedBatchNormV3", "Relu");
    assertThat(Fusions.fusedBatchNorm(bn, bn.opOrThrow("mid"))).isTrue();
    assertThat(Fusions.unsafeToRecompute(bn, bn.opOrThrow("mid"))).isTrue();
    DataflowGraph mm = chain(true, "MatMul", "BiasAdd", "Sigmoid");
    assertThat(Fusions.intermediate(mm, out(mm, "mid"))).isTrue();
  }

  /**
   * A MatMul + bias add + sigmoid, tanh or elu is one oneDNN kernel whose activation is another
   * approximation than TensorFlow's: its middle is guarded (the corpus gru's first loss moved
   * when a plan read it).
   */
  @Test
  void theMiddleOfAMatMulChainWithAnInexactActivationIsAnIntermediate() {
    for (String act : List.of("Sigmoid", "Tanh", "Elu")) {
      DataflowGraph g = chain("MatMul", "BiasAdd", act);
      assertThat(Fusions.intermediate(g, out(g, "mid"))).as(act).isTrue();
      assertThat(Fusions.unsafeToRecompute(g, g.opOrThrow("act"))).as(act).isTrue();
      DataflowGraph two = chain("MatMul", "BiasAdd", act, "other");
      assertThat(Fusions.intermediate(two, out(two, "mid"))).as(act).isFalse();
    }
    // a batch norm does not fuse with a sigmoid
    DataflowGraph bn = chain("Conv2D", "FusedBatchNormV3", "Sigmoid");
    assertThat(Fusions.fusedBatchNorm(bn, bn.opOrThrow("mid"))).isFalse();
  }

  @Test
  void aBatchNormReadOnlyByItsActivationRunsFused() {
    DataflowGraph g = chain("Conv2D", "FusedBatchNormV3", "Relu");
    assertThat(Fusions.fusedBatchNorm(g, g.opOrThrow("mid"))).isTrue();
    assertThat(Fusions.unsafeToRecompute(g, g.opOrThrow("mid"))).isTrue();
    assertThat(Fusions.fusedBatchNorm(g, g.opOrThrow("conv"))).isFalse();
    // a batch norm after a MatMul fuses with its activation too (_FusedBatchNormEx)
    DataflowGraph mm = chain("MatMul", "FusedBatchNorm", "Relu");
    assertThat(Fusions.fusedBatchNorm(mm, mm.opOrThrow("mid"))).isTrue();
    // with a second forward reader it does not
    DataflowGraph two = chain("Conv2D", "FusedBatchNormV3", "Relu", "other");
    assertThat(Fusions.fusedBatchNorm(two, two.opOrThrow("mid"))).isFalse();
    // a bias add is not a batch norm
    DataflowGraph bias = chain("Conv2D", "BiasAdd", "Relu");
    assertThat(Fusions.fusedBatchNorm(bias, bias.opOrThrow("mid"))).isFalse();
    assertThat(Fusions.unsafeToRecompute(bias, bias.opOrThrow("mid"))).isFalse();
  }
}
