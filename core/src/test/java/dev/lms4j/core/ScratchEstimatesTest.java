package dev.lms4j.core;

import static dev.lms4j.core.graph.Tensor.float32;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.ScratchEstimates;
import dev.lms4j.core.graph.ScratchEstimates.Host;
import dev.lms4j.core.graph.Tensor;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The scratch estimates against what traced steps measured on a 2-core AMD EPYC (32 MiB L3),
 * op by op: {@code peak_bytes - live_bytes} of TensorFlow's step statistics for the named op of
 * the named graph. Where the trace is larger than the estimate, the allocator handed the kernel
 * a larger free chunk (a 27 MiB request traced as 30 or 32 MiB); those are not checked here.
 */
class ScratchEstimatesTest {
  private static final Host EPYC = new Host(2, 32L << 20);
  /** A 2-core AMD EPYC with AVX-512 VNNI and BF16: TensorFlow turns oneDNN on there. */
  private static final Host EPYC_ONEDNN = new Host(2, 32L << 20, true);

  /** A filter gradient: x and dy fed, the filter's shape as the output. */
  private static long filterGradient(Host host, long[] x, long[] dy, long[] filter) {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), float32(x))
        .op("dy", "Placeholder", OpCategory.FORWARD, List.of(), float32(dy))
        .op("fs", "Const", OpCategory.FORWARD, List.of(),
            new Tensor("int32", new long[] {filter.length}, 4L * filter.length, false))
        .op("dw", filter.length == 5 ? "Conv3DBackpropFilterV2" : "Conv2DBackpropFilter",
            OpCategory.BACKWARD, List.of("x", "fs", "dy"), float32(filter))
        .build();
    return ScratchEstimates.estimate(g, g.opOrThrow("dw"), host);
  }

  /** An input gradient: the filter and dy fed, the input's shape as the output. */
  private static long inputGradient(Host host, long[] filter, long[] dy, long[] x) {
    DataflowGraph g = DataflowGraph.builder()
        .op("w", "Placeholder", OpCategory.FORWARD, List.of(), float32(filter))
        .op("dy", "Placeholder", OpCategory.FORWARD, List.of(), float32(dy))
        .op("is", "Const", OpCategory.FORWARD, List.of(),
            new Tensor("int32", new long[] {x.length}, 4L * x.length, false))
        .op("dx", x.length == 5 ? "Conv3DBackpropInputV2" : "Conv2DBackpropInput",
            OpCategory.BACKWARD, List.of("is", "w", "dy"), float32(x))
        .build();
    return ScratchEstimates.estimate(g, g.opOrThrow("dx"), host);
  }

  @Test
  void filterGradientsShardTheBatchByThirtyMibNotCappedByTheBatch() {
    // resnet-resource, gradients/Conv2DBackpropFilter: traced 27.00 MiB. Work unit 1024 x 288
    // + 1024 x 32 + 288 x 32 = 336896 elements: 24 images' col buffers, though the batch is 16
    assertThat(filterGradient(EPYC, new long[] {16, 32, 32, 32}, new long[] {16, 32, 32, 32},
        new long[] {3, 3, 32, 32})).isEqualTo(24L * 1024 * 288 * 4);
    // its first layer, gradients/Conv2DBackpropFilter_8 (3 input channels): traced 13.61 MiB
    assertThat(filterGradient(EPYC, new long[] {16, 32, 32, 3}, new long[] {16, 32, 32, 32},
        new long[] {3, 3, 3, 32})).isEqualTo(129L * 1024 * 27 * 4);
    // lenet b100, gradients/Conv2DBackpropFilter (5x5): traced 21.53 MiB
    assertThat(filterGradient(EPYC, new long[] {100, 14, 14, 32}, new long[] {100, 14, 14, 64},
        new long[] {5, 5, 32, 64})).isEqualTo(36L * 196 * 800 * 4);
    // unet, gradients/Conv2DBackpropFilter_13 (a large filter, small images): traced 1.83 MiB
    assertThat(filterGradient(EPYC, new long[] {4, 4, 4, 256}, new long[] {4, 4, 4, 256},
        new long[] {3, 3, 256, 256})).isEqualTo(13L * 16 * 2304 * 4);
  }

  @Test
  void inputGradientsTakeOneImageWhenAThreadsShareIsLargeElseShard() {
    // unet, gradients/Conv2DBackpropInput_1: work unit 657664 elements, 328832 per thread
    // (>= 64 Ki floats): one image's col buffer, traced 2.25 MiB
    long[] w16 = {3, 3, 16, 16};
    long[] dy = {4, 64, 64, 16};
    assertThat(inputGradient(EPYC, w16, dy, new long[] {4, 64, 64, 16}))
        .isEqualTo(4096L * 144 * 4);
    // unet, gradients/Conv2DBackpropInput_12: 118784 elements, 59392 per thread: sharded,
    // 67 images, traced 9.42 MiB
    assertThat(inputGradient(EPYC, new long[] {3, 3, 64, 128}, new long[] {4, 8, 8, 128},
        new long[] {4, 8, 8, 64})).isEqualTo(67L * 64 * 576 * 4);
    // with 16 threads the first one's share (41104) is below the threshold: sharded
    long sixteen = inputGradient(new Host(16, 32L << 20), w16, dy, new long[] {4, 64, 64, 16});
    assertThat(sixteen).isEqualTo(12L * 4096 * 144 * 4);
    // a batch of one is always one image
    assertThat(inputGradient(new Host(16, 32L << 20), w16, new long[] {1, 64, 64, 16},
        new long[] {1, 64, 64, 16})).isEqualTo(4096L * 144 * 4);
  }

  @Test
  void maxPoolGradientsHoldArgMaxIndicesAndACopyOfThePooledOutput() {
    // lenet b100, gradients/MaxPoolGradV2_1: traced 7.18 MiB = int64 indices + a float copy
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), float32(100, 28, 28, 32))
        .op("y", "MaxPool", OpCategory.FORWARD, List.of("x"), float32(100, 14, 14, 32))
        .op("dy", "Placeholder", OpCategory.FORWARD, List.of(), float32(100, 14, 14, 32))
        .op("dx", "MaxPoolGradV2", OpCategory.BACKWARD, List.of("x", "y", "dy"),
            float32(100, 28, 28, 32))
        .build();
    assertThat(ScratchEstimates.estimate(g, g.opOrThrow("dx"), EPYC))
        .isEqualTo(100L * 14 * 14 * 32 * 12);
    assertThat(ScratchEstimates.estimate(g, g.opOrThrow("y"), EPYC)).isZero();
  }

  @Test
  void threeDimensionalGradientsUseTheL3AndFallBackToEigenWhenTheBufferIsHuge() {
    long[] x = {8, 16, 16, 16, 16};
    long[] dy = {8, 16, 16, 16, 16};
    long[] w = {3, 3, 3, 16, 16};
    // out image 4096, filter total 432: work unit 1769472 + 65536 + 6912 = 1841920 elements;
    // ceil(8 Mi floats / 1841920) = 5 images, a buffer 8 times the op's tensors
    assertThat(filterGradient(EPYC, x, dy, w)).isEqualTo(5L * 4096 * 432 * 4);
    assertThat(filterGradient(new Host(2, 8L << 20), x, dy, w))
        .isEqualTo(2L * 4096 * 432 * 4); // a smaller L3, fewer images per shard
    // input gradient with a batch above one: sharded the same way
    assertThat(inputGradient(EPYC, w, dy, x)).isEqualTo(5L * 4096 * 432 * 4);
    // a tiny volume: the col buffer would be far over 25 times the tensors: Eigen, no buffer
    assertThat(filterGradient(EPYC, new long[] {1, 2, 2, 2, 1}, new long[] {1, 2, 2, 2, 1},
        new long[] {2, 2, 2, 1, 1})).isZero();
  }

  @Test
  void unknownShapesFallBackToTheRulesOfThumbAndOtherOpsHaveNone() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(),
            new Tensor("float32", new long[] {-1, 32, 32, 32}, 2L << 20, false))
        .op("dy", "Placeholder", OpCategory.FORWARD, List.of(),
            new Tensor("float32", new long[] {-1, 32, 32, 32}, 2L << 20, false))
        .op("fs", "Const", OpCategory.FORWARD, List.of(),
            new Tensor("int32", new long[] {4}, 16, false))
        .op("dw", "Conv2DBackpropFilter", OpCategory.BACKWARD, List.of("x", "fs", "dy"),
            float32(3, 3, 32, 32))
        .op("r", "Relu", OpCategory.FORWARD, List.of("x"), float32(16, 32, 32, 32))
        .build();
    // twice the two activations
    assertThat(ScratchEstimates.estimate(g, g.opOrThrow("dw"), EPYC)).isEqualTo(8L << 20);
    assertThat(ScratchEstimates.estimate(g, g.opOrThrow("r"), EPYC)).isZero();
  }

  @Test
  void theHostIsDetectedAndValidated() {
    Host h = ScratchEstimates.host();
    assertThat(h.threads()).isEqualTo(Runtime.getRuntime().availableProcessors());
    assertThat(h.l3Bytes()).isPositive();
    assertThatThrownBy(() -> new Host(0, 1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void oneDnnsConvolutionGradientsTakeNoScratch() {
    // Traced on an AMD EPYC with AVX-512 VNNI/BF16 (oneDNN on, _MklNativeConv2DBackpropFilter /
    // _MklNativeConv2DBackpropInput): peak - live was 0 for every convolution gradient of the
    // corpus unet, densenet and resnet-resource and of lenet b100 and resnet b32, where
    // TensorFlow's own kernels would ask for the 27 MiB col buffers above
    long[] x = {16, 32, 32, 32};
    long[] w = {3, 3, 32, 32};
    assertThat(filterGradient(EPYC_ONEDNN, x, x, w)).isZero();
    assertThat(inputGradient(EPYC_ONEDNN, w, x, x)).isZero();
    assertThat(filterGradient(EPYC, x, x, w)).isEqualTo(24L * 1024 * 288 * 4);
    // oneDNN takes float32 and bfloat16 only: a float64 gradient runs TensorFlow's kernel
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), f64(x))
        .op("dy", "Placeholder", OpCategory.FORWARD, List.of(), f64(x))
        .op("fs", "Const", OpCategory.FORWARD, List.of(),
            new Tensor("int32", new long[] {4}, 16, false))
        .op("dw", "Conv2DBackpropFilter", OpCategory.BACKWARD, List.of("x", "fs", "dy"), f64(w))
        .build();
    assertThat(ScratchEstimates.estimate(g, g.opOrThrow("dw"), EPYC_ONEDNN))
        .isEqualTo(ScratchEstimates.estimate(g, g.opOrThrow("dw"), EPYC)).isPositive();
  }

  @Test
  void oneDnnFollowsTensorFlowsPolicy() {
    Set<String> vnni = Set.of("avx512f", "avx512_vnni");
    Set<String> skylake = Set.of("avx2", "avx512f", "avx512bw");
    // on by default with a neural-network feature, off without (AVX-512F alone is not enough)
    assertThat(Host.oneDnnEnabled(vnni, null)).isTrue();
    assertThat(Host.oneDnnEnabled(Set.of("amx_tile"), null)).isTrue();
    assertThat(Host.oneDnnEnabled(skylake, null)).isFalse();
    // TF_ENABLE_ONEDNN_OPTS overrides either way; other values leave the default
    assertThat(Host.oneDnnEnabled(vnni, "0")).isFalse();
    assertThat(Host.oneDnnEnabled(vnni, "False")).isFalse();
    assertThat(Host.oneDnnEnabled(skylake, "1")).isTrue();
    assertThat(Host.oneDnnEnabled(skylake, "TRUE")).isTrue();
    assertThat(Host.oneDnnEnabled(vnni, "yes")).isTrue();
    assertThat(Host.oneDnnEnabled(skylake, "yes")).isFalse();
  }

  private static Tensor f64(long... shape) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    return new Tensor("float64", shape, n * 8, false);
  }
  /** {@code y = MatMul(x, w)} with every tensor of element type {@code dtype}. */
  private static DataflowGraph matmul(String dtype, int bytes) {
    long[] x = {4096, 1024};
    long[] w = {1024, 1024};
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(),
            new Tensor(dtype, x, 4096L * 1024 * bytes, false))
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(),
            new Tensor(dtype, w, 1024L * 1024 * bytes, true))
        .op("y", "MatMul", OpCategory.FORWARD, List.of("x", "w"),
            new Tensor(dtype, x, 4096L * 1024 * bytes, false))
        .build();
  }

  @Test
  void aHalfPrecisionMatmulAsksForFloatCopiesOfItsInputsAndResult() {
    // corpus mlp-mixed, MatMul_1 ([4096, 1024] x [1024, 1024], float16), allocator log on this
    // machine (oneDNN on): its 8 MiB output, then 16, 4 and 16 MiB, freed as it ends
    DataflowGraph g = matmul("float16", 2);
    for (Host h : List.of(EPYC, EPYC_ONEDNN)) {
      assertThat(ScratchEstimates.estimateChunks(g, g.opOrThrow("y"), h))
          .containsExactly(16L << 20, 4L << 20, 16L << 20);
      assertThat(ScratchEstimates.estimate(g, g.opOrThrow("y"), h)).isEqualTo(36L << 20);
    }
    // float32 products ask for none; bfloat16 was not traced and gets none
    DataflowGraph f = matmul("float32", 4);
    assertThat(ScratchEstimates.estimate(f, f.opOrThrow("y"), EPYC)).isZero();
    assertThat(ScratchEstimates.estimateChunks(f, f.opOrThrow("y"), EPYC)).isEmpty();
    DataflowGraph b = matmul("bfloat16", 2);
    assertThat(ScratchEstimates.estimate(b, b.opOrThrow("y"), EPYC_ONEDNN)).isZero();
  }
}
