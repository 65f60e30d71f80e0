package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.types.TFloat32;

/**
 * {@code lenet}: a LeNet-style CNN for small grey images such as Fashion-MNIST (NHWC,
 * {@code [batch, 28, 28, 1]} by default).
 *
 * <p>Layout: conv5x5 ({@code width} channels, SAME) + ReLU + 2x2/2 max pool; conv5x5
 * ({@code 2 * width} channels) + ReLU + 2x2/2 max pool; flatten; dense ({@code dense} units) +
 * ReLU; dense to {@code classes} (the logits kernel scaled by {@link GraphBuilder#LOGITS_GAIN}).
 * Weights are He-initialised from seeded truncated normals, biases zero. The update is SGD with
 * momentum ({@code ApplyMomentum}; one zero-initialised accumulator per variable, named
 * {@code train/<variable>_momentum}); {@code momentum=0} gives plain SGD.
 *
 * <p>Options: {@code width} (default 32), {@code dense} (1024), {@code image} side (28),
 * {@code channels} (1), {@code classes} (10), SGD step {@code lr} (0.01), {@code momentum} (0.9)
 * and initialiser {@code seed} (42).
 */
final class LeNetModel extends ZooModel {

  private static final String NAME = "lenet";
  private static final List<Long> STRIDE_1 = List.of(1L, 1L, 1L, 1L);

  LeNetModel() {
    super(NAME, "LeNet-style CNN: 2 x (conv5x5 + ReLU + 2x2 max pool) from <width> channels, "
        + "dense(<dense>)+ReLU, dense to <classes>; SGD with momentum",
        "width", "32", "dense", "1024", "image", "28", "channels", "1", "classes", "10",
        "lr", "0.01", "momentum", "0.9", "seed", "42");
  }

  @Override
  public int defaultBatch() {
    return 100;
  }

  @Override
  TrainingGraph graph(int batch, Options o) {
    int width = o.intValue("width", 1, 1 << 14);
    int dense = o.intValue("dense", 1, 1 << 16);
    int image = o.intValue("image", 4, 1 << 14);
    int channels = o.intValue("channels", 1, 1 << 10);
    int classes = o.intValue("classes", 2, 1 << 20);

    try (GraphBuilder b = builder(o)) {
      Placeholder<TFloat32> x = b.placeholder("x", Shape.of(batch, image, image, channels));
      Placeholder<TFloat32> labels = b.placeholder("labels", Shape.of(batch, classes));
      Ops net = b.ops().withSubScope(NAME);

      Operand<TFloat32> h = convPool(b, net.withSubScope("conv1"), x, channels, width);
      h = convPool(b, net.withSubScope("conv2"), h, width, 2 * width);
      int side = (image + 3) / 4; // two SAME 2x2/2 pools: ceil(ceil(image / 2) / 2)
      long flat = (long) side * side * 2 * width;
      if (flat > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(NAME + ": image and width give " + flat
            + " features after the convolutions, too many");
      }
      Ops fc = net.withSubScope("dense");
      Operand<TFloat32> f = fc.withName("flatten").reshape(h,
          fc.constant(new long[] {batch, flat}));
      var kernel = b.heWeight(fc, "kernel", Shape.of(flat, dense), flat, 1.0);
      var bias = b.zeros(fc, "bias", Shape.of(dense));
      f = fc.withName("relu").nn.relu(fc.nn.biasAdd(fc.linalg.matMul(f, kernel), bias));

      Ops head = net.withSubScope("logits");
      var k2 = b.heWeight(head, "kernel", Shape.of(dense, classes), dense,
          GraphBuilder.LOGITS_GAIN);
      var b2 = b.zeros(head, "bias", Shape.of(classes));
      Operand<TFloat32> logits = head.nn.biasAdd(head.linalg.matMul(f, k2), b2);
      return b.finish(NAME, logits, x, labels);
    }
  }

  /** conv5x5 (SAME, with bias) + ReLU + 2x2/2 max pool under {@code layer}. */
  private static Operand<TFloat32> convPool(GraphBuilder b, Ops layer, Operand<TFloat32> in,
      int cin, int cout) {
    var kernel = b.heWeight(layer, "kernel", Shape.of(5, 5, cin, cout), 25L * cin, 1.0);
    var bias = b.zeros(layer, "bias", Shape.of(cout));
    Operand<TFloat32> c = layer.withName("relu").nn.relu(
        layer.nn.biasAdd(layer.nn.conv2d(in, kernel, STRIDE_1, "SAME"), bias));
    return layer.withName("pool").nn.maxPool(c, layer.constant(new int[] {1, 2, 2, 1}),
        layer.constant(new int[] {1, 2, 2, 1}), "SAME");
  }
}
