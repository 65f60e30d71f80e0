package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import java.util.Map;
import java.util.Set;

/**
 * Predicts the time of a training step and of what LMS adds to it.
 *
 * <ul>
 *   <li>Op time: the measured time from a profiled step when there is one (op name to
 *       microseconds, e.g. from {@code RunMetadata} step stats), else
 *       {@code max(flops / flopRate, bytes touched / memoryBandwidth) + opOverhead}, with FLOPs
 *       from the static shapes (matmuls and convolutions and their gradients counted exactly,
 *       other ops one FLOP per output element).</li>
 *   <li>Swap time: each swap-out moves the tensor once to the tier, each swap-in once back, at
 *       the tier's measured bandwidth plus a fixed latency. With {@code overlap} the transfers
 *       run beside compute and cost only what exceeds it; without (ops run in the caller's
 *       thread, lms4j's default), they add up.</li>
 *   <li>Recompute time: the time of each cloned op again.</li>
 * </ul>
 *
 * <pre>{@code
 * CostModel cm = CostModel.defaults().withProfile(microsByOp);
 * double ms = cm.stepMs(graph, swapPlan, recomputePlan);
 * }</pre>
 *
 * @param flopRate        sustained FLOP/s of compute-bound kernels
 * @param memoryBandwidth bytes/s of memory-bound kernels
 * @param opOverheadUs    fixed cost per op, microseconds
 * @param swapBandwidth   bytes/s of one direction of a swap (out or in)
 * @param swapLatencyUs   fixed cost per swap op, microseconds
 * @param overlap         transfers overlap with compute
 * @param profileUs       measured op times by op name, microseconds (may be empty)
 */
public record CostModel(double flopRate, double memoryBandwidth, double opOverheadUs,
    double swapBandwidth, double swapLatencyUs, boolean overlap, Map<String, Double> profileUs) {

  private static final Set<String> MATMULS = Set.of("MatMul", "BatchMatMul", "BatchMatMulV2",
      "BatchMatMulV3");
  private static final Set<String> CONV_FORWARD = Set.of("Conv2D", "Conv3D",
      "DepthwiseConv2dNative");

  public CostModel {
    profileUs = Map.copyOf(profileUs);
  }

  /**
   * Defaults calibrated on this project's 2-core CPU machines from a traced step of the zoo's
   * resnet (6 blocks, batch 32, oneDNN): convolution gradients ran at 230-380 GFLOP/s, so 250e9;
   * ReLU, ReluGrad and Add moved 30-45 GB/s, so 30e9; about 5 us per small op; and the
   * standard-op host swap (SerializeTensor, ParseTensor) added ~200 ms for 268 MiB out and back,
   * about 2.7 GB/s each way, so 2.7e9. Ops run in the caller's thread: no overlap.
   */
  public static CostModel defaults() {
    return new CostModel(250e9, 30e9, 5, 2.7e9, 20, false, Map.of());
  }

  /** The same model with measured op times. */
  public CostModel withProfile(Map<String, Double> microsByOp) {
    return new CostModel(flopRate, memoryBandwidth, opOverheadUs, swapBandwidth, swapLatencyUs,
        overlap, microsByOp);
  }

  /** The same model with another swap bandwidth (bytes/s, one direction). */
  public CostModel withSwapBandwidth(double bytesPerSecond) {
    return new CostModel(flopRate, memoryBandwidth, opOverheadUs, bytesPerSecond, swapLatencyUs,
        overlap, profileUs);
  }

  /** Estimated FLOPs of one op. */
  public static double flops(DataflowGraph g, Op op) {
    if (op.outputs().isEmpty()) {
      return 0;
    }
    double out = elements(op.output(0));
    String t = op.type();
    if (MATMULS.contains(t) && op.inputs().size() >= 2) {
      // out [.., M, N]; a holds M*K elements (transposed or not): K = |a| / M
      long[] s = op.output(0).shape();
      double m = s.length >= 2 ? s[s.length - 2] : 1;
      double batch = out / Math.max(1, s.length >= 2 ? s[s.length - 2] * s[s.length - 1] : out);
      double k = elements(g.tensor(op.inputs().get(0))) / Math.max(1, batch * m);
      return 2 * out * k;
    }
    if (CONV_FORWARD.contains(t) && op.inputs().size() >= 2) {
      return 2 * out * kernelVolumeTimesIn(g.tensor(op.inputs().get(1)));
    }
    if ((t.startsWith("Conv2DBackprop") || t.startsWith("Conv3DBackprop"))
        && op.inputs().size() >= 3) {
      Tensor filter = t.contains("Filter") ? op.output(0) : g.tensor(op.inputs().get(1));
      return 2 * elements(g.tensor(op.inputs().get(2))) * kernelVolumeTimesIn(filter);
    }
    return out;
  }

  /** Predicted time of one op, microseconds. */
  public double opUs(DataflowGraph g, Op op) {
    Double measured = profileUs.get(op.name());
    if (measured != null) {
      return measured;
    }
    if (MemorySimulator.isPinned(op)) {
      return 0;
    }
    if (OpTypes.SHAPE_ONLY.contains(op.type())) {
      return opOverheadUs;
    }
    double bytes = op.transientOutputBytes();
    for (TensorId in : op.inputs()) {
      bytes += g.tensor(in).bytes();
    }
    return Math.max(flops(g, op) / flopRate, bytes / memoryBandwidth) * 1e6 + opOverheadUs;
  }

  /** Predicted compute time of a step of {@code g}, milliseconds. */
  public double computeMs(DataflowGraph g) {
    double us = 0;
    for (Op op : g.ops()) {
      us += opUs(g, op);
    }
    return us / 1000;
  }

  /** Time the swaps of a plan add, milliseconds (0 beyond compute when overlapped). */
  public double swapMs(SwapPlan plan) {
    double us = 0;
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      us += so.bytes() / swapBandwidth * 1e6 + swapLatencyUs;
      us += so.swapIns().size() * (so.bytes() / swapBandwidth * 1e6 + swapLatencyUs);
    }
    return us / 1000;
  }

  /** Time the clones of a plan add, milliseconds. */
  public double recomputeMs(DataflowGraph g, RecomputePlan plan) {
    double us = 0;
    for (RecomputePlan.Group gr : plan.groups()) {
      for (String name : gr.ops()) {
        us += opUs(g, g.opOrThrow(name));
      }
    }
    return us / 1000;
  }

  /** Predicted step time of {@code g} with both plans applied, milliseconds. */
  public double stepMs(DataflowGraph g, SwapPlan swaps, RecomputePlan recompute) {
    double compute = computeMs(g) + recomputeMs(g, recompute);
    double transfers = swapMs(swaps);
    return overlap ? Math.max(compute, transfers) : compute + transfers;
  }

  private static double elements(Tensor t) {
    double n = 1;
    for (long d : t.shape()) {
      n *= d;
    }
    return n;
  }

  /** Product of a filter's dims except the last (output channels): kh * kw * (kd *) cin. */
  private static double kernelVolumeTimesIn(Tensor filter) {
    long[] s = filter.shape();
    double v = 1;
    for (int i = 0; i < s.length - 1; i++) {
      v *= s[i];
    }
    return v;
  }
}
