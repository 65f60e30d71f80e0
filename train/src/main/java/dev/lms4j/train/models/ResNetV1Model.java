package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.nn.FusedBatchNorm;
import org.tensorflow.types.TFloat32;

/**
 * {@code resnet18}, {@code resnet50}, {@code resnet101}: the ResNet of He et al. (2016) as
 * torchvision builds it ("v1.5": the stride of a bottleneck sits on its 3x3 convolution), on NHWC
 * images.
 *
 * <p>Layout: stem conv7x7/2 ({@code width} channels, no bias) + batch norm + ReLU + 3x3/2 max
 * pool; four stages of residual blocks with {@code width * (1, 2, 4, 8)} channels (times 4 at
 * the output of a bottleneck); stages 2-4 start with stride 2. ResNet-18 has basic blocks
 * (conv3x3-BN-ReLU-conv3x3-BN) [2, 2, 2, 2]; ResNet-50 and -101 bottlenecks
 * (conv1x1-BN-ReLU-conv3x3-BN-ReLU-conv1x1-BN) [3, 4, 6, 3] and [3, 4, 23, 3]. A shortcut is the
 * identity, or a 1x1 convolution + batch norm where the shape changes. Then ReLU of the sum;
 * the head is a global average pool and a dense layer (with bias) to {@code classes}.
 *
 * <p>Batch norm is {@code FusedBatchNormV3} in training mode (batch statistics, learned scale
 * and offset, epsilon 1e-5; TF Java 1.1 has its gradient). No moving averages are kept: the
 * graphs train, inference with population statistics is not built. The last batch norm of each
 * residual branch starts with scale 0 (Goyal et al. 2017), so each block starts as the identity.
 *
 * <p>Options: {@code image} side (default 64), {@code width} (16; the published models have 64),
 * {@code channels} (3), {@code classes} (10; published 1000), SGD step {@code lr} (0.05) and
 * initialiser {@code seed} (42). The published sizes are {@code image=224 width=64
 * classes=1000}: ResNet-50 has 25,557,032 parameters there.
 */
final class ResNetV1Model extends ZooModel {

  private static final List<Long> STRIDE_1 = List.of(1L, 1L, 1L, 1L);
  private static final List<Long> STRIDE_2 = List.of(1L, 2L, 2L, 1L);

  private final String name;
  private final int[] blocks;
  private final boolean bottleneck;

  private ResNetV1Model(String name, int[] blocks, boolean bottleneck) {
    super(name, "ResNet-" + name.substring(6) + " (He et al., torchvision v1.5): "
        + (bottleneck ? "bottleneck" : "basic") + " blocks " + java.util.Arrays.toString(blocks)
        + ", batch norm; published size image=224 width=64 classes=1000",
        "image", "64", "width", "16", "channels", "3", "classes", "10", "lr", "0.05",
        "seed", "42");
    this.name = name;
    this.blocks = blocks;
    this.bottleneck = bottleneck;
  }

  static ResNetV1Model resnet18() {
    return new ResNetV1Model("resnet18", new int[] {2, 2, 2, 2}, false);
  }

  static ResNetV1Model resnet50() {
    return new ResNetV1Model("resnet50", new int[] {3, 4, 6, 3}, true);
  }

  static ResNetV1Model resnet101() {
    return new ResNetV1Model("resnet101", new int[] {3, 4, 23, 3}, true);
  }

  @Override
  public int defaultBatch() {
    return 8;
  }

  @Override
  TrainingGraph graph(int batch, Options o) {
    int image = o.intValue("image", 32, 1 << 14);
    int width = o.intValue("width", 1, 1 << 12);
    int channels = o.intValue("channels", 1, 1 << 10);
    int classes = o.intValue("classes", 2, 1 << 20);
    int expansion = bottleneck ? 4 : 1;

    try (GraphBuilder b = builder(o)) {
      Placeholder<TFloat32> x = b.placeholder("x", Shape.of(batch, image, image, channels));
      Placeholder<TFloat32> labels = b.placeholder("labels", Shape.of(batch, classes));
      Ops net = b.ops().withSubScope(name);

      Ops stem = net.withSubScope("stem");
      Operand<TFloat32> h = stem.withName("relu").nn.relu(
          bn(b, stem, "bn", conv(b, stem, "conv", x, 7, channels, width, 2), width, false));
      h = stem.withName("pool").nn.maxPool(h, stem.constant(new int[] {1, 3, 3, 1}),
          stem.constant(new int[] {1, 2, 2, 1}), "SAME");

      int cin = width;
      for (int s = 0; s < blocks.length; s++) {
        Ops stage = net.withSubScope("stage" + (s + 1));
        int mid = width << s;
        for (int k = 0; k < blocks[s]; k++) {
          int stride = s > 0 && k == 0 ? 2 : 1;
          Ops blk = stage.withSubScope("block" + k);
          h = bottleneck ? bottleneckBlock(b, blk, h, cin, mid, stride)
              : basicBlock(b, blk, h, cin, mid, stride);
          cin = mid * expansion;
        }
      }

      Ops head = net.withSubScope("logits");
      Operand<TFloat32> pooled =
          head.withName("global_pool").math.mean(h, head.constant(new int[] {1, 2}));
      var kernel = b.heWeight(head, "kernel", Shape.of(cin, classes), cin,
          GraphBuilder.LOGITS_GAIN);
      var bias = b.zeros(head, "bias", Shape.of(classes));
      Operand<TFloat32> logits = head.nn.biasAdd(head.linalg.matMul(pooled, kernel), bias);
      return b.finish(name, logits, x, labels);
    }
  }

  private static Operand<TFloat32> basicBlock(GraphBuilder b, Ops blk, Operand<TFloat32> in,
      int cin, int cout, int stride) {
    Operand<TFloat32> r = blk.withName("relu1").nn.relu(
        bn(b, blk, "bn1", conv(b, blk, "conv1", in, 3, cin, cout, stride), cout, false));
    r = bn(b, blk, "bn2", conv(b, blk, "conv2", r, 3, cout, cout, 1), cout, true);
    return join(b, blk, in, r, cin, cout, stride);
  }

  private static Operand<TFloat32> bottleneckBlock(GraphBuilder b, Ops blk, Operand<TFloat32> in,
      int cin, int mid, int stride) {
    int cout = 4 * mid;
    Operand<TFloat32> r = blk.withName("relu1").nn.relu(
        bn(b, blk, "bn1", conv(b, blk, "conv1", in, 1, cin, mid, 1), mid, false));
    r = blk.withName("relu2").nn.relu(
        bn(b, blk, "bn2", conv(b, blk, "conv2", r, 3, mid, mid, stride), mid, false));
    r = bn(b, blk, "bn3", conv(b, blk, "conv3", r, 1, mid, cout, 1), cout, true);
    return join(b, blk, in, r, cin, cout, stride);
  }

  /** ReLU of branch plus shortcut (a projection with batch norm when the shape changes). */
  private static Operand<TFloat32> join(GraphBuilder b, Ops blk, Operand<TFloat32> in,
      Operand<TFloat32> branch, int cin, int cout, int stride) {
    Operand<TFloat32> shortcut = in;
    if (stride != 1 || cin != cout) {
      Ops proj = blk.withSubScope("shortcut");
      shortcut = bn(b, proj, "bn", conv(b, proj, "conv", in, 1, cin, cout, stride), cout, false);
    }
    return blk.withName("out").nn.relu(blk.withName("add").math.add(branch, shortcut));
  }

  /** A k x k SAME convolution without bias under {@code scope/name}. */
  private static Operand<TFloat32> conv(GraphBuilder b, Ops scope, String name,
      Operand<TFloat32> in, int k, int cin, int cout, int stride) {
    Ops layer = scope.withSubScope(name);
    var kernel = b.heWeight(layer, "kernel", Shape.of(k, k, cin, cout), (long) k * k * cin, 1.0);
    return layer.nn.conv2d(in, kernel, stride == 1 ? STRIDE_1 : STRIDE_2, "SAME");
  }

  /**
   * Training-mode batch norm ({@code FusedBatchNormV3}) with scale and offset variables; the
   * scale starts at 0 when {@code zeroScale} (last norm of a residual branch), else 1.
   */
  static Operand<TFloat32> bn(GraphBuilder b, Ops scope, String name, Operand<TFloat32> in,
      int channels, boolean zeroScale) {
    Ops layer = scope.withSubScope(name);
    var gamma = zeroScale ? b.zeros(layer, "gamma", Shape.of(channels))
        : b.ones(layer, "gamma", Shape.of(channels));
    var beta = b.zeros(layer, "beta", Shape.of(channels));
    Operand<TFloat32> none = layer.constant(new float[0]);
    return layer.withName("norm").nn.fusedBatchNorm(in, gamma, beta, none, none,
        FusedBatchNorm.epsilon(1e-5f), FusedBatchNorm.isTraining(true)).y();
  }
}
