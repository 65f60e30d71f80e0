package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.graph.Levels;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
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
 *       the tier's bandwidth plus a fixed latency (host: {@code swapBandwidth},
 *       {@code swapLatencyUs}; disk: {@code diskBandwidth}, {@code diskLatencyUs}). Without
 *       {@code overlap} (ops run in the caller's thread, lms4j's default with the standard-op
 *       swap) every transfer adds to the step. With {@code overlap} a transfer runs beside the
 *       compute that may run while it is in flight (a swap-out: from its producer's end to its
 *       first swap-in's start; a swap-in: from when its inputs and triggers are done to its
 *       first consumer's start, on the levelled schedule); only the part that exceeds that
 *       window adds to the step, and the step is never shorter than all transfers back to
 *       back (one copy engine).</li>
 *   <li>Recompute time: the time of each cloned op again.</li>
 * </ul>
 *
 * <pre>{@code
 * CostModel cm = CostModel.defaults().withProfile(microsByOp);
 * double ms = PlanCosts.stepMs(cm, graph, swapPlan, recomputePlan);   // in core.plan
 * }</pre>
 *
 * @param flopRate        sustained FLOP/s of compute-bound kernels
 * @param memoryBandwidth bytes/s of memory-bound kernels
 * @param opOverheadUs    fixed cost per op, microseconds
 * @param swapBandwidth   bytes/s of one direction of a swap (out or in)
 * @param swapLatencyUs   fixed cost per swap op, microseconds
 * @param overlap         transfers overlap with compute
 * @param profileUs       measured op times by op name, microseconds (may be empty)
 * @param diskBandwidth   bytes/s of one direction of a disk-tier swap
 * @param diskLatencyUs   fixed cost per disk-tier swap op, microseconds
 * @param computeOverheadUs extra fixed cost of each convolution or matmul (and their gradients),
 *                        microseconds: kernel set-up and layout reorders, which dominate the
 *                        small ones
 */
public record CostModel(double flopRate, double memoryBandwidth, double opOverheadUs,
    double swapBandwidth, double swapLatencyUs, boolean overlap, Map<String, Double> profileUs,
    double diskBandwidth, double diskLatencyUs, double computeOverheadUs) {

  /** Default disk-tier bandwidth (one direction), bytes/s: page-cache-bound writes and reads. */
  public static final double DEFAULT_DISK_BANDWIDTH = 1.0e9;
  /** Default disk-tier latency per transfer op, microseconds (file open, write, close). */
  public static final double DEFAULT_DISK_LATENCY_US = 200;

  private static final Set<String> MATMULS = Set.of("MatMul", "BatchMatMul", "BatchMatMulV2",
      "BatchMatMulV3");
  private static final Set<String> CONV_FORWARD = Set.of("Conv2D", "Conv3D",
      "DepthwiseConv2dNative");

  /** Op types that read and write their data about three times (batch norms: statistics,
   *  then normalisation; their gradients likewise). */
  private static final Set<String> THREE_PASS = Set.of("FusedBatchNorm", "FusedBatchNormV2",
      "FusedBatchNormV3", "FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3");

  public CostModel {
    profileUs = Map.copyOf(profileUs);
  }

  /** A model whose disk tier has the default bandwidth and latency, no compute-op overhead. */
  public CostModel(double flopRate, double memoryBandwidth, double opOverheadUs,
      double swapBandwidth, double swapLatencyUs, boolean overlap, Map<String, Double> profileUs) {
    this(flopRate, memoryBandwidth, opOverheadUs, swapBandwidth, swapLatencyUs, overlap,
        profileUs, DEFAULT_DISK_BANDWIDTH, DEFAULT_DISK_LATENCY_US, 0);
  }

  /** A model with no extra compute-op overhead. */
  public CostModel(double flopRate, double memoryBandwidth, double opOverheadUs,
      double swapBandwidth, double swapLatencyUs, boolean overlap, Map<String, Double> profileUs,
      double diskBandwidth, double diskLatencyUs) {
    this(flopRate, memoryBandwidth, opOverheadUs, swapBandwidth, swapLatencyUs, overlap,
        profileUs, diskBandwidth, diskLatencyUs, 0);
  }

  /**
   * Defaults calibrated on this project's 2-core CPU machines (oneDNN) from traced steps of
   * three zoo models, op by op against the estimate (docs/planner.md, "Calibration"): the
   * resnet with 6 blocks (batch 32), ResNet-50 (width 32, 64x64 images, batch 32) and the
   * GPT-2-style decoder (4 layers, width 256, batch 8). Convolutions and matmuls ran at 90-215
   * GFLOP/s, the large ones fastest: {@code flops / 200e9 + 350 us} each fits all three within
   * 15% (a flat 250e9 predicted ResNet-50's small convolutions at 40% of their time, so the
   * planners recomputed convolutions rather than swap their outputs, which measured slower).
   * Batch norms take about three passes over their data; ReLU, ReluGrad and Add moved 30-45
   * GB/s, so 30e9; about 5 us per small op. The standard-op host swap (SerializeTensor,
   * ParseTensor) added ~200 ms for 268 MiB out and back, about 2.7 GB/s each way, so 2.7e9. Ops
   * run in the caller's thread: no overlap.
   */
  public static CostModel defaults() {
    return new CostModel(200e9, 30e9, 5, 2.7e9, 20, false, Map.of(), DEFAULT_DISK_BANDWIDTH,
        DEFAULT_DISK_LATENCY_US, 350);
  }

  /** The same model with measured op times. */
  public CostModel withProfile(Map<String, Double> microsByOp) {
    return new CostModel(flopRate, memoryBandwidth, opOverheadUs, swapBandwidth, swapLatencyUs,
        overlap, microsByOp, diskBandwidth, diskLatencyUs, computeOverheadUs);
  }

  /** The same model with another host-tier swap bandwidth (bytes/s, one direction). */
  public CostModel withSwapBandwidth(double bytesPerSecond) {
    return withTier(Tier.HOST, bytesPerSecond, swapLatencyUs);
  }

  /**
   * The same model with another bandwidth (bytes/s, one direction) and latency (microseconds
   * per transfer op) for {@code tier}; {@link Tier#DEVICE_PLACEMENT} shares the host's.
   */
  public CostModel withTier(Tier tier, double bytesPerSecond, double latencyUs) {
    if (!(bytesPerSecond > 0) || latencyUs < 0) {
      throw new IllegalArgumentException("bandwidth must be positive and latency >= 0");
    }
    return tier == Tier.DISK
        ? new CostModel(flopRate, memoryBandwidth, opOverheadUs, swapBandwidth, swapLatencyUs,
            overlap, profileUs, bytesPerSecond, latencyUs, computeOverheadUs)
        : new CostModel(flopRate, memoryBandwidth, opOverheadUs, bytesPerSecond, latencyUs,
            overlap, profileUs, diskBandwidth, diskLatencyUs, computeOverheadUs);
  }

  /** The same model with transfers overlapping compute ({@code true}) or adding to it. */
  public CostModel withOverlap(boolean on) {
    return new CostModel(flopRate, memoryBandwidth, opOverheadUs, swapBandwidth, swapLatencyUs,
        on, profileUs, diskBandwidth, diskLatencyUs, computeOverheadUs);
  }

  /**
   * Loads measured op times from a per-op trace as {@code StepLoop} writes it with
   * {@code LMS4J_DUMP_TRACE} (tab-separated: start micros, op name, bytes in use, op peak,
   * output bytes, duration micros). An op that appears several times (one row per device or
   * per kernel) gets the sum. Lines that do not parse are skipped.
   */
  public static Map<String, Double> loadTrace(Path tsv) {
    List<String> lines;
    try {
      lines = Files.readAllLines(tsv);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Map<String, Double> us = new HashMap<>();
    for (String line : lines) {
      String[] f = line.split("\t");
      if (f.length < 6) {
        continue;
      }
      try {
        us.merge(f[1], Double.parseDouble(f[5].trim()), Double::sum);
      } catch (NumberFormatException e) {
        // a header or a damaged row
      }
    }
    return us;
  }

  /** Time to move {@code bytes} once to or from {@code tier}, microseconds. */
  public double transferUs(long bytes, Tier tier) {
    return tier == Tier.DISK
        ? bytes / diskBandwidth * 1e6 + diskLatencyUs
        : bytes / swapBandwidth * 1e6 + swapLatencyUs;
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
    if (THREE_PASS.contains(op.type())) {
      bytes *= 3;
    }
    return Math.max(flops(g, op) / flopRate, bytes / memoryBandwidth) * 1e6 + opOverheadUs
        + (isComputeBound(op) ? computeOverheadUs : 0);
  }

  /** Predicted compute time of a step of {@code g}, milliseconds (swap ops not counted). */
  public double computeMs(DataflowGraph g) {
    double us = 0;
    for (Op op : g.ops()) {
      if (!isSwap(op)) {
        us += opUs(g, op);
      }
    }
    return us / 1000;
  }

  /**
   * The transfer time a rewritten graph {@code r} adds to its compute, milliseconds: with
   * {@code overlap}, what each transfer does not hide behind the compute of its window (see the
   * class comment), and at least the excess of all transfers over all compute; without, every
   * transfer.
   */
  public double unhiddenMs(DataflowGraph r, Tier tier) {
    int n = r.size();
    double[] start = new double[n];
    double[] end = new double[n];
    double t = 0;
    for (int v : Levels.of(r).schedule()) {
      Op op = r.op(v);
      start[v] = t;
      if (!isSwap(op)) {
        t += opUs(r, op);
      }
      end[v] = t;
    }
    double compute = t;
    double total = 0;
    double unhidden = 0;
    for (Op op : r.ops()) {
      if (!isSwap(op)) {
        continue;
      }
      double x = transferUs(op.outputs().get(0).bytes() > 0 ? op.outputs().get(0).bytes()
          : r.tensor(op.inputs().get(0)).bytes(), tier);
      total += x;
      if (!overlap) {
        unhidden += x;
        continue;
      }
      double ready = 0;
      for (int p : r.predecessors(op.id())) {
        ready = Math.max(ready, end[p]);
      }
      double need = Double.POSITIVE_INFINITY;
      for (int c : r.successors(op.id())) {
        need = Math.min(need, start[c]);
      }
      if (need == Double.POSITIVE_INFINITY) {
        need = compute;
      }
      unhidden += Math.max(0, x - Math.max(0, need - ready));
    }
    double added = Math.max(unhidden, total - compute);
    return Math.max(0, added) / 1000;
  }

  /** Convolutions and matmuls, forward and gradient: the ops {@code computeOverheadUs} adds to. */
  private static boolean isComputeBound(Op op) {
    String t = op.type();
    return MATMULS.contains(t) || CONV_FORWARD.contains(t) || t.startsWith("Conv2DBackprop")
        || t.startsWith("Conv3DBackprop") || t.startsWith("DepthwiseConv2dNativeBackprop");
  }

  private static boolean isSwap(Op op) {
    return op.type().equals(OpTypes.SWAP_OUT) || op.type().equals(OpTypes.SWAP_IN);
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
