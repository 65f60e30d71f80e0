package dev.lms4j.train.corpus;

import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.TensorFlow;
import org.tensorflow.framework.optimizers.Momentum;
import org.tensorflow.framework.optimizers.RMSProp;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.nn.Conv2dBackpropInput;
import org.tensorflow.op.nn.FusedBatchNorm;
import org.tensorflow.types.TFloat32;

/** The convolutional families: ResNet-style, DenseNet-style, a 2D U-Net and MobileNet-style. */
final class ConvFamilies {
  private static final List<Long> STRIDE_1 = List.of(1L, 1L, 1L, 1L);
  private static final List<Long> STRIDE_2 = List.of(1L, 2L, 2L, 1L);
  private static boolean transposeGradient;

  private ConvFamilies() {}

  /**
   * A ResNet-style CNN: a 3x3 stem, {@code blocks} residual blocks of two 3x3 convolutions with
   * batch norm (training mode) and ReLU, a global mean pool and a dense layer to 10 classes.
   */
  static TrainingGraph resnet(Net.Vars vars, Net.Update update, boolean small, long seed) {
    int batch = small ? 4 : 16;
    int side = small ? 16 : 32;
    int width = small ? 8 : 32;
    int blocks = small ? 2 : 4;
    try (Net n = new Net(vars, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, side, side, 3), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      Operand<TFloat32> h = tf.nn.relu(conv(n, "stem", x, 3, 3, width));
      for (int b = 0; b < blocks; b++) {
        String p = "block" + b;
        Operand<TFloat32> r = tf.nn.relu(batchNorm(n, p + "_bn1", conv(n, p + "_conv1", h, 3,
            width, width), width));
        r = batchNorm(n, p + "_bn2", conv(n, p + "_conv2", r, 3, width, width), width);
        h = tf.nn.relu(tf.math.add(h, r));
      }
      Operand<TFloat32> pooled = tf.math.mean(h, tf.constant(new int[] {1, 2}));
      Operand<TFloat32> logits = n.dense(pooled, "logits", width, 10);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      return n.finish(n.updates(loss, n.params(), update, 0.05f));
    }
  }

  /**
   * A DenseNet-style CNN: a stem, two dense blocks in which every layer's 3x3 convolution reads
   * the concat of all earlier feature maps, a 1x1 transition with max pool between them, a mean
   * pool and a dense layer; trained with {@code org.tensorflow.framework.optimizers.Momentum}.
   */
  static TrainingGraph densenet(boolean small, long seed) {
    int batch = small ? 4 : 16;
    int side = small ? 16 : 32;
    int growth = small ? 4 : 16;
    int layers = small ? 3 : 6;
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, side, side, 3), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      int channels = 2 * growth;
      Operand<TFloat32> h = tf.nn.relu(conv(n, "stem", x, 3, 3, channels));
      for (int blk = 0; blk < 2; blk++) {
        List<Operand<TFloat32>> features = new ArrayList<>(List.of(h));
        for (int l = 0; l < layers; l++) {
          Operand<TFloat32> in = features.size() == 1 ? features.get(0)
              : tf.concat(features, tf.constant(3));
          features.add(tf.nn.relu(conv(n, "d" + blk + "_l" + l, in, 3, channels, growth)));
          channels += growth;
        }
        h = tf.concat(features, tf.constant(3));
        if (blk == 0) {
          int out = channels / 2;
          h = tf.nn.relu(conv(n, "trans" + blk, h, 1, channels, out));
          h = tf.nn.maxPool(h, tf.constant(new int[] {1, 2, 2, 1}),
              tf.constant(new int[] {1, 2, 2, 1}), "SAME");
          channels = out;
        }
      }
      Operand<TFloat32> pooled = tf.math.mean(h, tf.constant(new int[] {1, 2}));
      Operand<TFloat32> logits = n.dense(pooled, "logits", channels, 10);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      // variable names hold no '/': the framework's slot names would be invalid
      new Momentum(n.graph, 0.02f, 0.9f).minimize(loss, "train_op");
      return n.finishInitOnly();
    }
  }

  /**
   * A 2D U-Net of {@code levels} levels: two 3x3 convolutions per level, 2x2 max pool down,
   * 2x2 stride-2 transposed convolution up ({@code Conv2DBackpropInput}, as
   * {@code conv2d_transpose} builds it), concat with the skip, and a 1x1 convolution to one
   * channel; mean squared error against a normal target; plain SGD.
   */
  static TrainingGraph unet(boolean small, long seed) {
    return small ? unet(2, 16, 4, 2, seed) : unet(4, 64, 16, 4, seed);
  }

  /** The U-Net at a given batch, image side, width and number of levels. */
  static TrainingGraph unet(int batch, int side, int width, int levels, long seed) {
    registerTransposeGradient();
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, side, side, 1), "normal");
      Operand<TFloat32> target = n.input("target", Shape.of(batch, side, side, 1), "normal");
      List<Operand<TFloat32>> skips = new ArrayList<>();
      List<Integer> widths = new ArrayList<>();
      Operand<TFloat32> h = x;
      int c = 1;
      int s = side;
      for (int l = 0; l < levels; l++) {
        int w = width << l;
        h = tf.nn.relu(conv(n, "down" + l + "_a", h, 3, c, w));
        h = tf.nn.relu(conv(n, "down" + l + "_b", h, 3, w, w));
        skips.add(h);
        widths.add(w);
        h = tf.nn.maxPool(h, tf.constant(new int[] {1, 2, 2, 1}),
            tf.constant(new int[] {1, 2, 2, 1}), "SAME");
        c = w;
        s /= 2;
      }
      int w = width << levels;
      h = tf.nn.relu(conv(n, "bottom_a", h, 3, c, w));
      h = tf.nn.relu(conv(n, "bottom_b", h, 3, w, w));
      c = w;
      for (int l = levels - 1; l >= 0; l--) {
        int out = widths.get(l);
        s *= 2;
        Net.Param f = n.he("up" + l + "_t", Shape.of(2, 2, out, c), 4L * c);
        h = tf.nn.conv2dBackpropInput(tf.constant(new int[] {batch, s, s, out}), f.value(), h,
            STRIDE_2, "SAME");
        h = tf.concat(List.of(skips.get(l), h), tf.constant(3));
        h = tf.nn.relu(conv(n, "up" + l + "_a", h, 3, 2 * out, out));
        h = tf.nn.relu(conv(n, "up" + l + "_b", h, 3, out, out));
        c = out;
      }
      Operand<TFloat32> y = conv(n, "head", h, 1, c, 1);
      Operand<TFloat32> loss = n.mseLoss(y, target);
      return n.finish(n.updates(loss, n.params(), Net.Update.SGD, 0.01f));
    }
  }

  /**
   * A MobileNetV2-style CNN: a stride-2 3x3 stem, then inverted residual blocks (a 1x1
   * expansion by {@code expand}, a 3x3 depthwise convolution ({@code DepthwiseConv2dNative}),
   * each with batch norm in training mode and ReLU6, and a linear 1x1 projection with batch
   * norm; a residual add where the block keeps its stride and width), a global mean pool and a
   * dense layer to 10 classes; trained with {@code org.tensorflow.framework.optimizers.RMSProp}
   * with momentum, as MobileNets are, on ref variables. Each block's expanded maps are
   * {@code expand} times its input and are read again by the backward pass (the depthwise
   * filter gradient, the batch-norm gradients, {@code Relu6Grad}).
   */
  static TrainingGraph mobilenet(boolean small, long seed) {
    return small ? mobilenet(4, 16, 8, new int[][] {{8, 1}, {12, 2}, {12, 1}}, 4, seed)
        : mobilenet(16, 64, 16, new int[][] {{16, 1}, {24, 2}, {24, 1}, {32, 2}, {32, 1},
            {64, 2}, {64, 1}}, 6, seed);
  }

  /**
   * The MobileNet at a given batch, image side, stem width, blocks ({@code {width, stride}}
   * each) and expansion factor.
   */
  static TrainingGraph mobilenet(int batch, int side, int stem, int[][] blocks, int expand,
      long seed) {
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, side, side, 3), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      Net.Param sw = n.he("stem_w", Shape.of(3, 3, 3, stem), 27);
      Operand<TFloat32> h = tf.nn.relu6(batchNorm(n, "stem_bn",
          tf.nn.conv2d(x, sw.value(), STRIDE_2, "SAME"), stem));
      int c = stem;
      for (int b = 0; b < blocks.length; b++) {
        String p = "mb" + b;
        int out = blocks[b][0];
        int wide = c * expand;
        Net.Param ew = n.he(p + "_expand_w", Shape.of(1, 1, c, wide), c);
        Operand<TFloat32> r = tf.nn.relu6(batchNorm(n, p + "_expand_bn",
            tf.nn.conv2d(h, ew.value(), STRIDE_1, "SAME"), wide));
        Net.Param dw = n.he(p + "_dw_w", Shape.of(3, 3, wide, 1), 9);
        r = tf.nn.relu6(batchNorm(n, p + "_dw_bn", tf.nn.depthwiseConv2dNative(r, dw.value(),
            blocks[b][1] == 2 ? STRIDE_2 : STRIDE_1, "SAME"), wide));
        Net.Param pw = n.he(p + "_project_w", Shape.of(1, 1, wide, out), wide);
        r = batchNorm(n, p + "_project_bn", tf.nn.conv2d(r, pw.value(), STRIDE_1, "SAME"), out);
        h = blocks[b][1] == 1 && out == c ? tf.math.add(h, r) : r;
        c = out;
      }
      Operand<TFloat32> pooled = tf.math.mean(h, tf.constant(new int[] {1, 2}));
      Operand<TFloat32> logits = n.dense(pooled, "logits", c, 10);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      // variable names hold no '/': the framework's slot names would be invalid
      new RMSProp(n.graph, 0.01f, 0.9f, 0.9f, 1.0f, false).minimize(loss, "train_op");
      return n.finishInitOnly();
    }
  }

  /** A SAME {@code k x k} convolution with bias. */
  static Operand<TFloat32> conv(Net n, String name, Operand<TFloat32> in, int k, int cin,
      int cout) {
    Net.Param w = n.he(name + "_w", Shape.of(k, k, cin, cout), (long) k * k * cin);
    Net.Param b = n.filled(name + "_b", Shape.of(cout), 0f);
    return n.tf.nn.biasAdd(n.tf.nn.conv2d(in, w.value(), STRIDE_1, "SAME"), b.value());
  }

  /** {@code FusedBatchNormV3} in training mode (batch statistics) with scale and offset. */
  private static Operand<TFloat32> batchNorm(Net n, String name, Operand<TFloat32> in, int c) {
    Net.Param scale = n.filled(name + "_scale", Shape.of(c), 1f);
    Net.Param offset = n.filled(name + "_offset", Shape.of(c), 0f);
    Operand<TFloat32> empty = n.tf.constant(new float[0]);
    FusedBatchNorm<TFloat32, TFloat32> bn = n.tf.nn.fusedBatchNorm(in, scale.value(),
        offset.value(), empty, empty, FusedBatchNorm.isTraining(true));
    return bn.y();
  }

  /**
   * The gradient of {@code Conv2DBackpropInput} (a transposed convolution), which TensorFlow's
   * C++ gradient registry lacks: for {@code y = conv2d_transpose(x, f)},
   * {@code dx = conv2d(dy, f)} and {@code df = Conv2DBackpropFilter(dy, shape(f), x)}.
   */
  private static synchronized void registerTransposeGradient() {
    if (transposeGradient) {
      return;
    }
    TensorFlow.registerCustomGradient(Conv2dBackpropInput.Inputs.class, (tf, in, dy) -> {
      if (!in.dataFormat.equals("NHWC") || Arrays.stream(in.dilations).anyMatch(d -> d != 1)) {
        throw new IllegalArgumentException("Conv2DBackpropInput gradient: NHWC, no dilation");
      }
      @SuppressWarnings("unchecked")
      Operand<TFloat32> f = (Operand<TFloat32>) in.filter;
      @SuppressWarnings("unchecked")
      Operand<TFloat32> x = (Operand<TFloat32>) in.outBackprop;
      @SuppressWarnings("unchecked")
      Operand<TFloat32> g = (Operand<TFloat32>) (Output<?>) dy.get(0);
      List<Long> strides = Arrays.stream(in.strides).boxed().toList();
      Operand<TFloat32> dx = tf.nn.conv2d(g, f, strides, in.padding);
      Operand<TFloat32> df = tf.nn.conv2dBackpropFilter(g, tf.shape(f), x, strides,
          in.padding);
      List<Operand<?>> grads = new ArrayList<>();
      grads.add(null);
      grads.add(df);
      grads.add(dx);
      return grads;
    });
    transposeGradient = true;
  }
}
