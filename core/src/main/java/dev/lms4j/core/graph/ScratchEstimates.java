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
 *   <li>Filter gradients ({@code Conv2DBackpropFilter}, 3D and depthwise forms): twice their
 *       two activation operands (the input and the incoming gradient), 0.7 times for 1x1
 *       kernels. Measured on resnet (batch 32): 19-48 MiB for 3x3 convolutions of 8 MiB
 *       activations, 6 MiB for 2 MiB ones, 4-9 MiB for strided 1x1 ones; LeNet's 5x5: 3x.</li>
 *   <li>Input gradients ({@code Conv2DBackpropInput}, ...): 0.3 times their output (measured
 *       0.28-0.33), 1.1 times for 1x1 kernels (strided shortcuts: 1.08).</li>
 *   <li>Both at most {@link #CONV_CAP}. Some tiny convolutions measured a 32 MiB high-water
 *       mark: the allocator hands out a larger free chunk than asked. A trace is far better.</li>
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
      // Filter: (input, filter_sizes, out_backprop) -> filter gradient;
      // Input: (input_sizes, filter, out_backprop) -> input gradient
      boolean filter = op.type().contains("BackpropFilter");
      long[] kernel = filter ? (op.outputs().isEmpty() ? new long[0] : op.output(0).shape())
          : op.inputs().size() > 1 ? g.tensor(op.inputs().get(1)).shape() : new long[0];
      boolean pointwise = kernel.length >= 4 && kernel[0] == 1 && kernel[1] == 1
          && (kernel.length == 4 || kernel[2] == 1);
      double bytes;
      if (filter) {
        long activations = (op.inputs().isEmpty() ? 0 : g.tensor(op.inputs().get(0)).bytes())
            + (op.inputs().size() > 2 ? g.tensor(op.inputs().get(2)).bytes() : 0);
        bytes = (pointwise ? 0.7 : 2.0) * activations;
      } else {
        bytes = (pointwise ? 1.1 : 0.3) * op.transientOutputBytes();
      }
      return Math.min(CONV_CAP, (long) bytes);
    }
    if (POOL_GRADIENTS.contains(op.type())) {
      return op.transientOutputBytes() / 2;
    }
    return 0;
  }
}
