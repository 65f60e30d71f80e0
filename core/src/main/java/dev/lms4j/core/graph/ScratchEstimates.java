package dev.lms4j.core.graph;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * Estimates of kernel scratch from an op's type and shapes, for ops whose scratch was not
 * measured ({@link Op#SCRATCH_UNKNOWN}); {@link DataflowGraph#scratchBytes(int)} uses them.
 *
 * <p>The figures follow what TensorFlow's CPU kernels ask the allocator for (TF 2.18, the
 * kernels registered for {@code DEVICE_CPU}; oneDNN does not take these ops over), checked
 * op by op against traced steps ({@code ScratchEstimatesTest} holds the traced figures):
 *
 * <ul>
 *   <li><b>Filter gradients</b> ({@code Conv2DBackpropFilter}): an im2col buffer of
 *       {@code shard x out_image x filter_total} elements, where a work unit is
 *       {@code out_image x (filter_total + out_depth) + filter_total x out_depth} elements and
 *       {@code shard = ceil(30 MiB / element size / work unit)} images. The shard is <i>not</i>
 *       capped by the batch: a small convolution asks for about 30 MiB whatever its batch.</li>
 *   <li><b>Input gradients</b> ({@code Conv2DBackpropInput}, also the forward pass of a
 *       transposed convolution): one image's col buffer ({@code out_image x filter_total}) when
 *       the batch is 1 or a thread's share of a work unit reaches 256 KiB, else the same 30 MiB
 *       sharding as filter gradients.</li>
 *   <li><b>3-D</b> ({@code Conv3DBackprop*}): the same with the L3 cache's size in place of
 *       30 MiB, one image only when the batch is 1; a col buffer over 25 times the op's tensors
 *       falls back to Eigen, which asks for none.</li>
 *   <li>{@code MaxPoolGrad}/{@code MaxPoolGradV2}: the arg-max indices (int64, one per element
 *       of the pooled output) and a copy of the pooled output (TensorFlow skips the copy when it
 *       can take the input over; counted anyway).</li>
 *   <li>Depthwise and 3-D pooling gradients: rules of thumb (twice the activations, 0.3 times
 *       the output, half the output).</li>
 *   <li>Float16 matrix products ({@code MatMul}): float32 copies of both
 *       inputs and of the result, asked for as three chunks ({@link #estimateChunks}). Everything
 *       else: none; forward convolutions, float32 matmuls and batch norms showed none.</li>
 * </ul>
 *
 * <p>The allocator may hand a kernel a larger free chunk than it asked for (a 27 MiB col buffer
 * traced as 30 or 32 MiB); that is the allocator model's business ({@code BfcReplay}), not the
 * estimate's. A measured trace is still better; these figures are what planning starts from.
 */
public final class ScratchEstimates {
  /** The largest scratch a depthwise convolution gradient is estimated to take (32 MiB). */
  public static final long CONV_CAP = 32L << 20;

  /** The working set TensorFlow's 2-D convolution gradients shard their batch for (30 MiB). */
  static final long WORKING_SET_2D = 30L << 20;

  /** A thread's share of an input gradient's work unit above which one image is done at once. */
  static final long L2_PER_THREAD = 256L << 10;

  /** A 3-D col buffer larger than this many times the op's tensors falls back to Eigen. */
  static final long MAX_3D_OVERHEAD = 25;

  private static final Set<String> DEPTHWISE = Set.of("DepthwiseConv2dNativeBackpropFilter",
      "DepthwiseConv2dNativeBackpropInput");
  /**
   * The CPU features ({@code /proc/cpuinfo} names) for which TensorFlow 2.18 turns oneDNN on by
   * default on Linux: AVX512_VNNI, AVX512_BF16, AVX_VNNI and the AMX features.
   */
  public static final Set<String> ONEDNN_FEATURES = Set.of("avx512_vnni", "avx512_bf16",
      "avx_vnni", "amx_tile", "amx_int8", "amx_bf16");

  /**
   * Convolution gradients TensorFlow's oneDNN rewrite takes over for float32 and bfloat16
   * ({@code _MklNative...} kernels).
   */
  private static final Set<String> ONEDNN_CONV_GRADIENTS = Set.of("Conv2DBackpropFilter",
      "Conv2DBackpropInput", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2",
      "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput");

  /** The element types oneDNN's rewrite takes convolutions over for. */
  private static final Set<String> ONEDNN_TYPES = Set.of("float32", "bfloat16");

  private static final Set<String> MAX_POOL_GRADIENTS = Set.of("MaxPoolGrad", "MaxPoolGradV2");

  /**
   * What the kernels' sizing depends on: the CPU device's worker threads, the L3 cache, and
   * whether TensorFlow runs oneDNN's kernels in place of its own.
   *
   * @param threads the intra-op threads TensorFlow's CPU device runs kernels on
   * @param l3Bytes the L3 cache Eigen reports (3-D convolution gradients size their shards by it)
   * @param oneDnn  whether TensorFlow's graph rewrite hands float convolutions to oneDNN
   *                ({@code _MklNative*} kernels), whose gradients traced no scratch to speak of
   */
  public record Host(int threads, long l3Bytes, boolean oneDnn) {
    /** Validates. */
    public Host {
      if (threads < 1 || l3Bytes < 1) {
        throw new IllegalArgumentException("threads and L3 size must be positive: " + threads
            + ", " + l3Bytes);
      }
    }

    /** A host whose convolutions run TensorFlow's own kernels (oneDNN off). */
    public Host(int threads, long l3Bytes) {
      this(threads, l3Bytes, false);
    }

    /**
     * This machine: the processors the JVM may use (TensorFlow's default intra-op threads), the
     * L3 cache size Linux reports for cpu0 (32 MiB when it cannot be read), and whether
     * TensorFlow turns oneDNN on here ({@link #oneDnnEnabled}: the CPU's flags from
     * {@code /proc/cpuinfo}, then {@code TF_ENABLE_ONEDNN_OPTS}). A worker JVM inherits this
     * process's environment, so the two agree.
     */
    public static Host detect() {
      return new Host(Runtime.getRuntime().availableProcessors(), l3FromSysfs(),
          oneDnnEnabled(cpuFlags(), System.getenv("TF_ENABLE_ONEDNN_OPTS")));
    }

    /**
     * Whether TensorFlow 2.18 (Linux x86-64) runs oneDNN's kernels: by default when the CPU has
     * one of the neural-network features {@link #ONEDNN_FEATURES} (TensorFlow's
     * {@code DefaultOneDnnPolicy}); {@code TF_ENABLE_ONEDNN_OPTS} set to {@code 0}/{@code false}
     * or {@code 1}/{@code true} (any case) overrides that, any other value leaves the default,
     * as TensorFlow reads it.
     *
     * @param cpuFlags the CPU's flags as {@code /proc/cpuinfo} names them
     * @param envValue {@code TF_ENABLE_ONEDNN_OPTS}, or null when unset
     */
    public static boolean oneDnnEnabled(Set<String> cpuFlags, String envValue) {
      if (envValue != null) {
        String v = envValue.trim().toLowerCase(Locale.ROOT);
        if (v.equals("0") || v.equals("false")) {
          return false;
        }
        if (v.equals("1") || v.equals("true")) {
          return true;
        }
      }
      for (String f : ONEDNN_FEATURES) {
        if (cpuFlags.contains(f)) {
          return true;
        }
      }
      return false;
    }

    /** The flags of the first processor in {@code /proc/cpuinfo} (empty when unreadable). */
    public static Set<String> cpuFlags() {
      try {
        for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
          if (line.startsWith("flags")) {
            int colon = line.indexOf(':');
            return Set.copyOf(List.of(line.substring(colon + 1).trim().split("\\s+")));
          }
        }
      } catch (IOException | RuntimeException e) {
        // unreadable: no flags, so TensorFlow's default is taken as off
      }
      return Set.of();
    }

    private static long l3FromSysfs() {
      Path dir = Path.of("/sys/devices/system/cpu/cpu0/cache");
      for (int i = 0; i < 8; i++) {
        Path index = dir.resolve("index" + i);
        try {
          if (!Files.isDirectory(index)
              || !Files.readString(index.resolve("level")).trim().equals("3")) {
            continue;
          }
          String size = Files.readString(index.resolve("size")).trim()
              .toUpperCase(Locale.ROOT);
          long unit = size.endsWith("K") ? 1L << 10 : size.endsWith("M") ? 1L << 20 : 1;
          String digits = size.replaceAll("[^0-9]", "");
          if (!digits.isEmpty()) {
            return Long.parseLong(digits) * unit;
          }
        } catch (IOException | NumberFormatException e) {
          // unreadable: try the next index, then the default
        }
      }
      return 32L << 20;
    }
  }

  private static final Host HOST = Host.detect();

  private ScratchEstimates() {}

  /** The host the default estimates are for ({@link Host#detect()}, read once). */
  public static Host host() {
    return HOST;
  }

  /**
   * The order {@code op}'s kernel allocates its outputs in on {@code host}: output indices,
   * every one once. TensorFlow's kernels allocate in output order, except oneDNN's batch norm
   * (the rewrite hands float {@code FusedBatchNorm*} to {@code _MklFusedBatchNorm*}): traced in
   * training on AVX-512 (bfc_allocator at VLOG 3, ResNet-18 at 16 to 128 channels), it allocates
   * its per-channel outputs (batch and saved mean and variance, reserve space) before y. Those
   * small chunks then take the free chunk of the step's best fit first, which y would have
   * fitted in.
   */
  public static int[] outputAllocationOrder(Op op, Host host) {
    int n = op.outputs().size();
    int[] order = new int[n];
    for (int k = 0; k < n; k++) {
      order[k] = allocatedOutput(op, host, k);
    }
    return order;
  }

  /**
   * The output {@code op}'s kernel allocates {@code k}-th on {@code host}
   * ({@link #outputAllocationOrder} without making the array: the allocator model asks per op
   * per replay).
   */
  public static int allocatedOutput(Op op, Host host, int k) {
    int n = op.outputs().size();
    boolean perChannelFirst = n > 1 && host.oneDnn() && OpTypes.BATCH_NORMS.contains(op.type())
        && ONEDNN_TYPES.contains(op.output(0).dtype());
    return perChannelFirst ? (k + 1) % n : k;
  }

  /**
   * The part of {@code op}'s estimated scratch that is a copy of an input its kernel makes only
   * when it cannot take that input's buffer over ({@code forward_input_or_allocate_temp}): a
   * max-pool gradient's copy of the pooled output (input 1), which it writes into. When the op
   * is the last reader of that buffer (its reference count is one), the kernel works in it and
   * allocates only its arg-max indices: traced on the zoo ResNet-18 (b32, image 64, width 16,
   * oneDNN on, auto's plan for 14 MiB, serial order), {@code gradients/MaxPoolGradV2}
   * allocated one 1 MiB temporary (the int64 indices of 131072 pooled values), not 1.5 MiB.
   *
   * @return {input index, bytes}, or null when the op makes no such copy
   */
  public static long[] forwardableInputCopy(DataflowGraph g, Op op) {
    if (MAX_POOL_GRADIENTS.contains(op.type()) && op.inputs().size() > 1) {
      Tensor pooled = g.tensor(op.inputs().get(1));
      if (elements(pooled.shape()) > 0 && pooled.bytes() > 0) {
        return new long[] {1, pooled.bytes()};
      }
    }
    return null;
  }

  /** The estimated scratch of {@code op} in {@code g} on this machine, in bytes. */
  public static long estimate(DataflowGraph g, Op op) {
    return estimate(g, op, HOST);
  }

  /** The estimated scratch of {@code op} in {@code g} on {@code host}, in bytes. */
  public static long estimate(DataflowGraph g, Op op, Host host) {
    String type = op.type();
    if (host.oneDnn() && ONEDNN_CONV_GRADIENTS.contains(type) && !op.outputs().isEmpty()
        && ONEDNN_TYPES.contains(op.output(0).dtype())) {
      // oneDNN's convolution gradients (traced on AVX-512 VNNI/BF16: 0 bytes beyond their
      // outputs, at every shape of the corpus and the zoo)
      return 0;
    }
    switch (type) {
      case "Conv2DBackpropFilter":
        return convGradient(g, op, host, true, 2);
      case "Conv2DBackpropInput":
        return convGradient(g, op, host, false, 2);
      case "Conv3DBackpropFilter":
      case "Conv3DBackpropFilterV2":
        return convGradient(g, op, host, true, 3);
      case "Conv3DBackpropInput":
      case "Conv3DBackpropInputV2":
        return convGradient(g, op, host, false, 3);
      default:
        break;
    }
    if (DEPTHWISE.contains(type)) {
      return ruleOfThumb(g, op);
    }
    if (MAX_POOL_GRADIENTS.contains(type) && op.inputs().size() > 1) {
      Tensor pooled = g.tensor(op.inputs().get(1));
      long elements = elements(pooled.shape());
      // int64 arg-max indices plus a copy of the pooled output
      return elements > 0 ? elements * Long.BYTES + pooled.bytes() : op.transientOutputBytes() / 2;
    }
    if (type.equals("MaxPool3DGrad")) {
      return op.transientOutputBytes() / 2;
    }
    long[] copies = halfMatmulCopies(g, op);
    return copies == null ? 0 : copies[0] + copies[1] + copies[2];
  }

  /**
   * Whether {@code op}'s kernel asks for its scratch before its outputs and frees it as it ends:
   * {@code Einsum}, which computes its product into a temporary and transposes that into the
   * output (traced: {@code btd,dhk->bhtk}, the 8 MiB product and then the 8 MiB output; the
   * output then took a region of its own while the product held the one before).
   */
  public static boolean scratchFirst(Op op) {
    return op.type().equals("Einsum");
  }

  /**
   * The chunks {@code op}'s estimated scratch is asked for in, in the order the kernel asks
   * (their sum is {@link #estimate}); none where it has none. One chunk but for half-precision
   * matrix products, which ask for three ({@link #halfMatmulCopies}): the allocator places them
   * apart, where one chunk of their sum would need that much contiguous free memory.
   */
  public static long[] estimateChunks(DataflowGraph g, Op op, Host host) {
    long[] copies = halfMatmulCopies(g, op);
    if (copies != null) {
      return copies;
    }
    long e = estimate(g, op, host);
    return e > 0 ? new long[] {e} : new long[0];
  }

  /**
   * A float16 matrix product's float32 copies: TensorFlow's CPU kernel computes in float32, and
   * asks for a float32 copy of its first input, of its second, and a float32 result (after its
   * float16 output), freed when it ends. Traced (this machine, AVX-512 with oneDNN on; the
   * allocator log of the corpus mlp-mixed, a [4096, 1024] x [1024, 1024] product in float16):
   * 8 MiB output, then 16, 4 and 16 MiB, the three freed before the next op; every float16
   * product of the step, forward and gradient, did the same. TensorFlow's minimum for that graph
   * was 181-183 MiB against a traced peak (tensors only) of 142.3. Not traced: bfloat16 (oneDNN
   * has its own kernel for it), so it gets none; a float16 {@code BatchMatMulV3} has no CPU
   * kernel in this TensorFlow (checked: "No OpKernel was registered").
   *
   * @return {first input, second input, result} in bytes, or null when {@code op} is no
   *     float16 matrix product of known shapes
   */
  static long[] halfMatmulCopies(DataflowGraph g, Op op) {
    if (!op.type().equals("MatMul") || op.inputs().size() < 2 || op.outputs().isEmpty()
        || !"float16".equals(op.output(0).dtype())) {
      return null;
    }
    long a = elements(g.tensor(op.inputs().get(0)).shape());
    long b = elements(g.tensor(op.inputs().get(1)).shape());
    long out = elements(op.output(0).shape());
    if (a <= 0 || b <= 0 || out <= 0) {
      return null;
    }
    return new long[] {a * Float.BYTES, b * Float.BYTES, out * Float.BYTES};
  }

  /**
   * A convolution gradient's im2col buffer, as TensorFlow's custom CPU kernels size it; the rule
   * of thumb where the shapes are not all known.
   */
  private static long convGradient(DataflowGraph g, Op op, Host host, boolean filterGrad,
      int spatial) {
    int rank = spatial + 2;
    if (op.inputs().size() < 3 || op.outputs().isEmpty()) {
      return 0;
    }
    long[] outBackprop = g.tensor(op.inputs().get(2)).shape();
    long[] filter = filterGrad ? op.output(0).shape() : g.tensor(op.inputs().get(1)).shape();
    long[] activation = filterGrad ? g.tensor(op.inputs().get(0)).shape() : op.output(0).shape();
    if (!known(outBackprop, rank) || !known(filter, rank) || !known(activation, rank)) {
      return ruleOfThumb(g, op);
    }
    long elementBytes = elementBytes(op.output(0));
    long batch = outBackprop[0];
    long outImage = 1;
    long filterTotal = filter[spatial]; // input depth
    for (int d = 0; d < spatial; d++) {
      outImage *= outBackprop[d + 1];
      filterTotal *= filter[d];
    }
    long outDepth = filter[spatial + 1];
    long col = outImage * filterTotal;
    long workUnit = col + outImage * outDepth + filterTotal * outDepth;
    if (workUnit <= 0) {
      return 0;
    }
    long workingSet = (spatial == 2 ? WORKING_SET_2D : host.l3Bytes()) / elementBytes;
    boolean oneImage;
    if (filterGrad) {
      oneImage = false;
    } else if (spatial == 2) {
      oneImage = batch == 1 || workUnit / host.threads() >= L2_PER_THREAD / elementBytes;
    } else {
      oneImage = batch == 1;
    }
    long shard = oneImage ? 1 : (workingSet + workUnit - 1) / workUnit;
    long colElements = shard * col;
    if (spatial == 3) {
      long tensors = elements(activation) + elements(filter) + elements(outBackprop);
      if (tensors > 0 && colElements / tensors > MAX_3D_OVERHEAD) {
        return 0; // Eigen's implementation, without a col buffer
      }
    }
    return colElements * elementBytes;
  }

  /** The rules of thumb for convolution gradients whose kernels are not modelled. */
  private static long ruleOfThumb(DataflowGraph g, Op op) {
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

  private static boolean known(long[] shape, int rank) {
    if (shape.length != rank) {
      return false;
    }
    for (long d : shape) {
      if (d < 1) {
        return false;
      }
    }
    return true;
  }

  private static long elements(long[] shape) {
    long n = 1;
    for (long d : shape) {
      if (d < 0) {
        return -1;
      }
      n *= d;
    }
    return n;
  }

  private static long elementBytes(Tensor t) {
    long n = elements(t.shape());
    return n > 0 && t.bytes() >= n ? Math.max(1, t.bytes() / n) : 4;
  }
}
