package dev.lms4j.core.graph;

import java.util.Set;

/**
 * Estimates of kernel scratch from an op's type and shapes, for ops whose scratch was not
 * measured ({@link Op#SCRATCH_UNKNOWN}); {@link DataflowGraph#scratchBytes(int)} uses them.
 *
 * <p>Rules of thumb from traced steps on an AMD EPYC without AVX-512 (TF 2.18, oneDNN on;
 * {@code docs/bench/fidelity.md} has the measurements):
 *
 * <ul>
 *   <li>Convolution gradients ({@code Conv2DBackpropFilter}, {@code Conv2DBackpropInput}, their
 *       3D forms): twice their two activation operands (input or its shape, and the incoming
 *       gradient), at most {@link #CONV_CAP}. Measured: 19-48 MiB for 3x3 convolutions of
 *       8 MiB activations, 6-10 MiB for 2-4 MiB ones, but also 32 MiB for some tiny ones (the
 *       allocator hands out a larger free chunk than asked); a trace is far better.</li>
 *   <li>{@code MaxPoolGrad}/{@code MaxPoolGradV2}: half its output (measured 0.5-0.75).</li>
 *   <li>Everything else: none. Forward convolutions, matmuls and batch norms showed none.</li>
 * </ul>
 */
public final class ScratchEstimates {
  /** The largest scratch a convolution gradient is estimated to take (32 MiB). */
  public static final long CONV_CAP = 32L << 20;

  private static final Set<String> CONV_GRADIENTS = Set.of("Conv2DBackpropFilter",
      "Conv2DBackpropInput", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2",
      "Conv3DBackpropFilter", "Conv3DBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
      "DepthwiseConv2dNativeBackpropInput");
  private static final Set<String> POOL_GRADIENTS = Set.of("MaxPoolGrad", "MaxPoolGradV2",
      "MaxPool3DGrad");

  private ScratchEstimates() {}

  /** The estimated scratch of {@code op} in {@code g}, in bytes. */
  public static long estimate(DataflowGraph g, Op op) {
    if (CONV_GRADIENTS.contains(op.type())) {
      // Filter: (input, filter_sizes, out_backprop); Input: (input_sizes, filter, out_backprop)
      long activations = op.inputs().size() > 2 ? g.tensor(op.inputs().get(2)).bytes() : 0;
      if (op.type().contains("BackpropFilter")) {
        activations += op.inputs().isEmpty() ? 0 : g.tensor(op.inputs().get(0)).bytes();
      } else {
        activations += op.transientOutputBytes();
      }
      return Math.min(CONV_CAP, 2 * activations);
    }
    if (POOL_GRADIENTS.contains(op.type())) {
      return op.transientOutputBytes() / 2;
    }
    return 0;
  }
}
