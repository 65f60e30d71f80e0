package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.types.TFloat32;

/**
 * {@code resnet}: a ResNet-style CNN without batch normalisation, on NHWC images.
 *
 * <p>Layout: stem conv3x3 ({@code width} channels) + ReLU + 3x3/2 max pool; then {@code stages}
 * stages of {@code blocks} residual blocks each. Stage {@code s} has {@code width * 2^s}
 * channels; every stage after the first starts with a stride-2 block whose shortcut is a 1x1
 * projection (other shortcuts are the identity). A block is conv3x3-ReLU-conv3x3, added to the
 * shortcut, then ReLU. The head is a global average pool and a dense layer to {@code classes}.
 * The second conv of each block is initialised scaled down by {@code 1/sqrt(total blocks)}
 * (Fixup-style) so the un-normalised residual sum stays bounded, and the logits kernel by
 * {@link GraphBuilder#LOGITS_GAIN}.
 *
 * <p>Options: {@code blocks} per stage (default 2), {@code stages} (3), {@code width} (64),
 * {@code image} side (64), {@code channels} (3), {@code classes} (10), SGD step {@code lr} (0.01)
 * and initialiser {@code seed} (42).
 */
final class ResNetModel extends ZooModel {

  private static final String NAME = "resnet";
  private static final List<Long> STRIDE_1 = List.of(1L, 1L, 1L, 1L);
  private static final List<Long> STRIDE_2 = List.of(1L, 2L, 2L, 1L);

  ResNetModel() {
    super(NAME, "ResNet-style CNN: stem conv + max pool, <stages> x <blocks> residual blocks from"
        + " <width> channels, global average pool, dense to <classes>",
        "blocks", "2", "stages", "3", "width", "64", "image", "64", "channels", "3",
        "classes", "10", "lr", "0.01", "seed", "42");
  }

  @Override
  TrainingGraph graph(int batch, Options o) {
    int blocks = o.intValue("blocks", 1, 1000);
    int stages = o.intValue("stages", 1, 10);
    int width = o.intValue("width", 1, 1 << 14);
    int image = o.intValue("image", 2, 1 << 14);
    int channels = o.intValue("channels", 1, 1 << 10);
    int classes = o.intValue("classes", 2, 1 << 20);
    if ((long) width << (stages - 1) > (1 << 16)) {
      throw new IllegalArgumentException(NAME + ": width * 2^(stages-1) must be <= 65536, got "
          + width + " * 2^" + (stages - 1));
    }
    double branchGain = 1.0 / Math.sqrt((double) blocks * stages);

    try (GraphBuilder b = builder(o)) {
      Placeholder<TFloat32> x = b.placeholder("x", Shape.of(batch, image, image, channels));
      Placeholder<TFloat32> labels = b.placeholder("labels", Shape.of(batch, classes));
      Ops net = b.ops().withSubScope(NAME);

      Ops stem = net.withSubScope("stem");
      Operand<TFloat32> h =
          stem.withName("relu").nn.relu(conv(b, stem, "conv", x, 3, channels, width, 1, 1.0));
      h = stem.withName("pool").nn.maxPool(h, stem.constant(new int[] {1, 3, 3, 1}),
          stem.constant(new int[] {1, 2, 2, 1}), "SAME");

      int cin = width;
      for (int s = 0; s < stages; s++) {
        Ops stage = net.withSubScope("stage" + s);
        int cout = width << s;
        for (int k = 0; k < blocks; k++) {
          int stride = s > 0 && k == 0 ? 2 : 1;
          h = block(b, stage.withSubScope("block" + k), h, cin, cout, stride, branchGain);
          cin = cout;
        }
      }

      Ops head = net.withSubScope("logits");
      Operand<TFloat32> pooled =
          head.withName("global_pool").math.mean(h, head.constant(new int[] {1, 2}));
      var kernel = b.heWeight(head, "kernel", Shape.of(cin, classes), cin,
          GraphBuilder.LOGITS_GAIN);
      var bias = b.zeros(head, "bias", Shape.of(classes));
      Operand<TFloat32> logits = head.nn.biasAdd(head.linalg.matMul(pooled, kernel), bias);
      return b.finish(NAME, logits, x, labels);
    }
  }

  /** conv3x3-ReLU-conv3x3 plus shortcut, then ReLU. */
  private static Operand<TFloat32> block(GraphBuilder b, Ops blk, Operand<TFloat32> in, int cin,
      int cout, int stride, double branchGain) {
    Operand<TFloat32> r =
        blk.withName("relu").nn.relu(conv(b, blk, "conv1", in, 3, cin, cout, stride, 1.0));
    r = conv(b, blk, "conv2", r, 3, cout, cout, 1, branchGain);
    Operand<TFloat32> shortcut = in;
    if (stride != 1 || cin != cout) {
      Ops proj = blk.withSubScope("shortcut");
      var kernel = b.heWeight(proj, "kernel", Shape.of(1, 1, cin, cout), cin, 1.0);
      shortcut = proj.nn.conv2d(in, kernel, stride == 1 ? STRIDE_1 : STRIDE_2, "SAME");
    }
    return blk.withName("out").nn.relu(blk.withName("add").math.add(r, shortcut));
  }

  /** A k x k SAME convolution with bias under {@code scope/name}. */
  private static Operand<TFloat32> conv(GraphBuilder b, Ops scope, String name,
      Operand<TFloat32> in, int k, int cin, int cout, int stride, double gain) {
    Ops layer = scope.withSubScope(name);
    var kernel = b.heWeight(layer, "kernel", Shape.of(k, k, cin, cout), (long) k * k * cin, gain);
    var bias = b.zeros(layer, "bias", Shape.of(cout));
    return layer.nn.biasAdd(
        layer.nn.conv2d(in, kernel, stride == 1 ? STRIDE_1 : STRIDE_2, "SAME"), bias);
  }
}
