package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.types.TFloat32;

/**
 * {@code vgg16}: VGG-16 (Simonyan and Zisserman 2015, configuration D) on NHWC images.
 *
 * <p>Layout: five blocks of 3x3 SAME convolutions with bias and ReLU, each followed by a 2x2/2
 * max pool: 2 x {@code width}, 2 x {@code 2 width}, 3 x {@code 4 width}, 3 x {@code 8 width},
 * 3 x {@code 8 width} channels; flatten ({@code (image/32)^2 * 8 width} features); dense
 * ({@code fc} units) + ReLU, dense ({@code fc}) + ReLU, dense to {@code classes}. Dropout is left
 * out (it is random: LMS would never recompute it, and losses would not be comparable between
 * runs); it has no parameters and no multiply-accumulates.
 *
 * <p>Options: {@code image} side, a multiple of 32 (default 32), {@code width} (8; published
 * 64), {@code fc} (64; published 4096), {@code channels} (3), {@code classes} (10; published
 * 1000), SGD step {@code lr} (0.01) and {@code seed} (42). At the published size
 * ({@code image=224 width=64 fc=4096 classes=1000}) it has 138,357,544 parameters.
 */
final class Vgg16Model extends ZooModel {

  private static final String NAME = "vgg16";
  private static final List<Long> STRIDE_1 = List.of(1L, 1L, 1L, 1L);
  /** Convolutions per block and their channel multiple of {@code width}. */
  private static final int[][] BLOCKS = {{2, 1}, {2, 2}, {3, 4}, {3, 8}, {3, 8}};

  Vgg16Model() {
    super(NAME, "VGG-16 (configuration D): 13 conv3x3+ReLU in 5 pooled blocks from <width> "
        + "channels, 2 x dense(<fc>)+ReLU, dense to <classes>; published size image=224 "
        + "width=64 fc=4096 classes=1000",
        "image", "32", "width", "8", "fc", "64", "channels", "3", "classes", "10", "lr", "0.01",
        "seed", "42");
  }

  @Override
  public int defaultBatch() {
    return 8;
  }

  @Override
  TrainingGraph graph(int batch, Options o) {
    int image = o.intValue("image", 32, 1 << 14);
    int width = o.intValue("width", 1, 1 << 12);
    int fc = o.intValue("fc", 1, 1 << 16);
    int channels = o.intValue("channels", 1, 1 << 10);
    int classes = o.intValue("classes", 2, 1 << 20);
    if (image % 32 != 0) {
      throw new IllegalArgumentException(NAME + ": option 'image' must be a multiple of 32, got "
          + image);
    }
    long side = image / 32;
    long flat = side * side * 8 * width;
    if (flat > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(NAME + ": image and width give " + flat
          + " features after the convolutions, too many");
    }

    try (GraphBuilder b = builder(o)) {
      Placeholder<TFloat32> x = b.placeholder("x", Shape.of(batch, image, image, channels));
      Placeholder<TFloat32> labels = b.placeholder("labels", Shape.of(batch, classes));
      Ops net = b.ops().withSubScope(NAME);

      Operand<TFloat32> h = x;
      int cin = channels;
      for (int blk = 0; blk < BLOCKS.length; blk++) {
        int cout = width * BLOCKS[blk][1];
        for (int k = 0; k < BLOCKS[blk][0]; k++) {
          Ops layer = net.withSubScope("conv" + (blk + 1) + "_" + (k + 1));
          var kernel = b.heWeight(layer, "kernel", Shape.of(3, 3, cin, cout), 9L * cin, 1.0);
          var bias = b.zeros(layer, "bias", Shape.of(cout));
          h = layer.withName("relu").nn.relu(
              layer.nn.biasAdd(layer.nn.conv2d(h, kernel, STRIDE_1, "SAME"), bias));
          cin = cout;
        }
        Ops pool = net.withSubScope("pool" + (blk + 1));
        h = pool.nn.maxPool(h, pool.constant(new int[] {1, 2, 2, 1}),
            pool.constant(new int[] {1, 2, 2, 1}), "VALID");
      }
      h = net.withName("flatten").reshape(h, net.constant(new long[] {batch, flat}));
      h = dense(b, net.withSubScope("fc6"), h, flat, fc, true, 1.0);
      h = dense(b, net.withSubScope("fc7"), h, fc, fc, true, 1.0);
      Operand<TFloat32> logits = dense(b, net.withSubScope("fc8"), h, fc, classes, false,
          GraphBuilder.LOGITS_GAIN);
      return b.finish(NAME, logits, x, labels);
    }
  }

  private static Operand<TFloat32> dense(GraphBuilder b, Ops layer, Operand<TFloat32> in,
      long cin, int cout, boolean relu, double gain) {
    var kernel = b.heWeight(layer, "kernel", Shape.of(cin, cout), cin, gain);
    var bias = b.zeros(layer, "bias", Shape.of(cout));
    Operand<TFloat32> y = layer.nn.biasAdd(layer.linalg.matMul(in, kernel), bias);
    return relu ? layer.withName("relu").nn.relu(y) : y;
  }
}
