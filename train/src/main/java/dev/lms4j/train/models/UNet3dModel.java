package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.nn.FusedBatchNorm;
import org.tensorflow.types.TFloat32;

/**
 * {@code unet3d}: the 3D U-Net of Çiçek et al. (MICCAI 2016), the model of the TFLMS case study,
 * on NDHWC volumes with a per-voxel softmax loss.
 *
 * <p>Layout with {@code levels = 4} and {@code width = 32} (the paper's): the analysis path has
 * per level two 3x3x3 convolutions (with bias), each followed by batch norm and ReLU, with
 * {@code width * 2^i} and {@code width * 2^(i+1)} channels at level {@code i} (32, 64 / 64, 128
 * / 128, 256 / 256, 512), and a 2x2x2/2 max pool between levels. The synthesis path has per
 * level a 2x2x2/2 up-convolution without bias that keeps the channel count (512, 256, 128),
 * the concatenation with the analysis path's level output (centre-cropped when the padding is
 * {@code valid}), and two 3x3x3 convolutions with batch norm and ReLU ({@code width *
 * 2^(i+1)} channels: 256, 128, 64). A final 1x1x1 convolution gives {@code classes} scores per
 * voxel; the loss is the mean softmax cross entropy over voxels against one-hot labels
 * {@code [batch, out depth, out side, out side, classes]}, the metric the share of voxels
 * whose argmax matches.
 *
 * <p>Batch norm is {@code FusedBatchNormV3} in training mode without learned scale and offset
 * (as Caffe's BatchNorm layer, which the paper used: it adds no parameters). The up-convolution
 * is written as one matrix product per input voxel, {@code [voxels, cin] . [cin, 8 cout]},
 * followed by a reshape and transpose that place the 2x2x2 outputs: exactly a stride-2, 2x2x2
 * transposed convolution, with ops whose gradients TF Java has. {@code Conv3D}'s gradient comes
 * from {@link ExtraGradients}.
 *
 * <p>Options: {@code side} (height = width of the input volume, default 16), {@code depth} (0:
 * same as {@code side}), {@code channels} (3), {@code classes} (3), {@code width} (4), {@code
 * levels} (4), {@code padding} ({@code same}, or {@code valid} as in the paper), SGD step
 * {@code lr} (0.01) and {@code seed} (42). The paper's setting is {@code side=132 depth=116
 * width=32 padding=valid} (output 44 x 44 x 28, 19,069,955 parameters).
 */
final class UNet3dModel extends ZooModel {

  private static final String NAME = "unet3d";
  private static final List<Long> STRIDE_1 = List.of(1L, 1L, 1L, 1L, 1L);
  private static final List<Long> POOL = List.of(1L, 2L, 2L, 2L, 1L);

  UNet3dModel() {
    super(NAME, "3D U-Net (Cicek et al. 2016): <levels> levels of 2 x (conv3x3x3 + BN + ReLU) "
        + "from <width> channels, max pool / up-convolution, skip concatenation, per-voxel "
        + "softmax; the paper's size is side=132 depth=116 width=32 padding=valid",
        "side", "16", "depth", "0", "channels", "3", "classes", "3", "width", "4",
        "levels", "4", "padding", "same", "lr", "0.01", "seed", "42");
  }

  @Override
  public int defaultBatch() {
    return 1;
  }

  @Override
  TrainingGraph graph(int batch, Options o) {
    int side = o.intValue("side", 1, 1 << 12);
    int depth = o.intValue("depth", 0, 1 << 12);
    int channels = o.intValue("channels", 1, 1 << 10);
    int classes = o.intValue("classes", 2, 1 << 16);
    int width = o.intValue("width", 1, 1 << 12);
    int levels = o.intValue("levels", 1, 8);
    boolean valid = o.choice("padding", "same", "valid").equals("valid");
    long[] dims = {depth == 0 ? side : depth, side, side};
    String padding = valid ? "VALID" : "SAME";
    ExtraGradients.register();

    try (GraphBuilder b = builder(o)) {
      Placeholder<TFloat32> x = b.placeholder("x",
          Shape.of(batch, dims[0], dims[1], dims[2], channels));
      Ops net = b.ops().withSubScope(NAME);

      List<Operand<TFloat32>> skips = new ArrayList<>();
      List<long[]> skipDims = new ArrayList<>();
      Operand<TFloat32> h = x;
      int cin = channels;
      for (int i = 0; i < levels; i++) {
        Ops level = net.withSubScope("down" + i);
        h = convBnRelu(b, level, "conv1", h, cin, width << i, padding);
        h = convBnRelu(b, level, "conv2", h, width << i, width << (i + 1), padding);
        cin = width << (i + 1);
        shrink(dims, valid);
        if (i < levels - 1) {
          skips.add(h);
          skipDims.add(dims.clone());
          for (int d = 0; d < 3; d++) {
            if (dims[d] % 2 != 0) {
              throw new IllegalArgumentException(NAME + ": level " + i + " gives a volume of "
                  + java.util.Arrays.toString(dims) + " (depth, side, side) to pool; choose side"
                  + " and depth so every pooled size is even (with padding=same: multiples of "
                  + (1 << (levels - 1)) + "; with valid: 8k + 60 for 4 levels, e.g. 132, 116)");
            }
            dims[d] /= 2;
          }
          h = level.withName("pool").nn.maxPool3d(h, POOL, POOL, "VALID");
        }
      }
      for (int i = levels - 2; i >= 0; i--) {
        Ops level = net.withSubScope("up" + i);
        h = upConv(b, level.withSubScope("upconv"), h, batch, dims, cin);
        for (int d = 0; d < 3; d++) {
          dims[d] *= 2;
        }
        Operand<TFloat32> skip = crop(level, skips.get(i), batch, skipDims.get(i), dims,
            width << (i + 1));
        h = level.withName("concat").concat(List.of(h, skip), level.constant(4));
        int cat = cin + (width << (i + 1));
        h = convBnRelu(b, level, "conv1", h, cat, width << (i + 1), padding);
        h = convBnRelu(b, level, "conv2", h, width << (i + 1), width << (i + 1), padding);
        cin = width << (i + 1);
        shrink(dims, valid);
      }
      Ops head = net.withSubScope("logits");
      var kernel = b.heWeight(head, "kernel", Shape.of(1, 1, 1, cin, classes), cin,
          GraphBuilder.LOGITS_GAIN);
      var bias = b.zeros(head, "bias", Shape.of(classes));
      Operand<TFloat32> logits = head.nn.biasAdd(head.nn.conv3d(h, kernel, STRIDE_1, "VALID"),
          bias);

      Placeholder<TFloat32> labels = b.placeholder("labels",
          Shape.of(batch, dims[0], dims[1], dims[2], classes));
      long voxels = batch * dims[0] * dims[1] * dims[2];
      Ops flat = net.withSubScope("flatten");
      Operand<TFloat32> l2 = flat.reshape(logits, flat.constant(new long[] {voxels, classes}));
      Operand<TFloat32> y2 = flat.reshape(labels, flat.constant(new long[] {voxels, classes}));
      Operand<TFloat32> xent = b.ops().nn.softmaxCrossEntropyWithLogits(l2, y2).loss();
      Operand<TFloat32> loss = b.ops().withName("loss").math.mean(xent,
          b.ops().constant(new int[] {0}));
      b.accuracyOfIds(flat.math.argMax(l2, flat.constant(1)),
          flat.math.argMax(y2, flat.constant(1)));
      return b.finish(NAME, List.of(GraphBuilder.feed(x, "normal"),
          GraphBuilder.feed(labels, "onehot")), loss);
    }
  }

  /** Two valid 3x3x3 convolutions take 4 voxels off every dimension. */
  private static void shrink(long[] dims, boolean valid) {
    if (!valid) {
      return;
    }
    for (int d = 0; d < 3; d++) {
      dims[d] -= 4;
      if (dims[d] < 1) {
        throw new IllegalArgumentException(NAME + ": the volume is too small for valid "
            + "convolutions at this depth of the network (choose a larger side and depth, e.g. "
            + "side=132 depth=116, or padding=same)");
      }
    }
  }

  /** conv3x3x3 with bias, batch norm (no scale/offset) and ReLU under {@code scope/name}. */
  private static Operand<TFloat32> convBnRelu(GraphBuilder b, Ops scope, String name,
      Operand<TFloat32> in, int cin, int cout, String padding) {
    Ops layer = scope.withSubScope(name);
    var kernel = b.heWeight(layer, "kernel", Shape.of(3, 3, 3, cin, cout), 27L * cin, 1.0);
    var bias = b.zeros(layer, "bias", Shape.of(cout));
    Operand<TFloat32> c = layer.nn.biasAdd(layer.nn.conv3d(in, kernel, STRIDE_1, padding), bias);
    float[] one = new float[cout];
    java.util.Arrays.fill(one, 1f);
    Operand<TFloat32> none = layer.constant(new float[0]);
    Operand<TFloat32> n = layer.withName("bn").nn.fusedBatchNorm(c, layer.constant(one),
        layer.constant(new float[cout]), none, none, FusedBatchNorm.epsilon(1e-5f),
        FusedBatchNorm.isTraining(true), FusedBatchNorm.dataFormat("NDHWC")).y();
    return layer.withName("relu").nn.relu(n);
  }

  /**
   * 2x2x2 stride-2 up-convolution without bias, {@code c} channels in and out: each input
   * voxel's {@code c} values times a {@code [c, 8 c]} kernel give its 2x2x2 output block.
   */
  private static Operand<TFloat32> upConv(GraphBuilder b, Ops up, Operand<TFloat32> in,
      int batch, long[] dims, int c) {
    var kernel = b.heWeight(up, "kernel", Shape.of(c, 8L * c), c, 1.0);
    long voxels = batch * dims[0] * dims[1] * dims[2];
    Operand<TFloat32> y = up.linalg.matMul(up.reshape(in, up.constant(new long[] {voxels, c})),
        kernel);
    y = up.reshape(y, up.constant(new long[] {batch, dims[0], dims[1], dims[2], 2, 2, 2, c}));
    y = up.linalg.transpose(y, up.constant(new int[] {0, 1, 4, 2, 5, 3, 6, 7}));
    return up.reshape(y, up.constant(
        new long[] {batch, 2 * dims[0], 2 * dims[1], 2 * dims[2], c}));
  }

  /** The centre {@code to} of a {@code from}-sized skip tensor (itself when equal). */
  private static Operand<TFloat32> crop(Ops level, Operand<TFloat32> skip, int batch,
      long[] from, long[] to, int c) {
    if (java.util.Arrays.equals(from, to)) {
      return skip;
    }
    // int32 begin and size: Slice's C++ gradient builds int32 shape arithmetic around them
    int[] begin = {0, (int) (from[0] - to[0]) / 2, (int) (from[1] - to[1]) / 2,
        (int) (from[2] - to[2]) / 2, 0};
    return level.withName("crop").slice(skip, level.constant(begin),
        level.constant(new int[] {batch, (int) to[0], (int) to[1], (int) to[2], c}));
  }
}
