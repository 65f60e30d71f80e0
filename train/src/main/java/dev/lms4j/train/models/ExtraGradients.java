package dev.lms4j.train.models;

import java.util.Arrays;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.TensorFlow;
import org.tensorflow.op.Ops;
import org.tensorflow.op.nn.Conv3d;
import org.tensorflow.op.nn.Conv3dBackpropFilter;
import org.tensorflow.op.train.BatchMatMul;
import org.tensorflow.types.TFloat32;

/**
 * Gradients TensorFlow's C++ gradient registry lacks in TF Java 1.1 and the zoo needs:
 * {@code Conv3D} (3D U-Net) and {@code BatchMatMulV3} (attention in GPT-2). They are registered
 * once per JVM through {@link TensorFlow#registerCustomGradient}; the gradient ops they add land
 * in the exported GraphDef like any other, so a graph built here runs anywhere.
 *
 * <p>The math is the textbook one: for {@code y = conv3d(x, w)},
 * {@code dx = Conv3DBackpropInputV2(shape(x), w, dy)} and
 * {@code dw = Conv3DBackpropFilterV2(x, shape(w), dy)}; for {@code z = x . y} with adjoint
 * flags, the products of {@code dz} with the other operand in the matching orientation. The
 * batch-matmul gradient supports equal batch dimensions only (no broadcasting), which is all
 * the zoo uses.
 */
public final class ExtraGradients {

  private static boolean registered;

  private ExtraGradients() {}

  /** Registers the gradients if this JVM has not yet done so. */
  public static synchronized void register() {
    if (registered) {
      return;
    }
    TensorFlow.registerCustomGradient(Conv3d.Inputs.class, ExtraGradients::conv3d);
    TensorFlow.registerCustomGradient(BatchMatMul.Inputs.class, ExtraGradients::batchMatMul);
    registered = true;
  }

  @SuppressWarnings("unchecked")
  private static List<Operand<?>> conv3d(Ops tf, Conv3d.Inputs<?> in, List<Output<?>> dy) {
    if (!in.dataFormat.equals("NDHWC") || Arrays.stream(in.dilations).anyMatch(d -> d != 1)) {
      throw new IllegalArgumentException("Conv3D gradient: only NDHWC without dilation");
    }
    Operand<TFloat32> x = (Operand<TFloat32>) in.input;
    Operand<TFloat32> w = (Operand<TFloat32>) in.filter;
    Operand<TFloat32> g = (Operand<TFloat32>) dy.get(0);
    List<Long> strides = Arrays.stream(in.strides).boxed().toList();
    Operand<TFloat32> dx = tf.nn.conv3dBackpropInput(tf.shape(x), w, g, strides, in.padding);
    Operand<TFloat32> dw = tf.nn.conv3dBackpropFilter(x, tf.shape(w), g, strides, in.padding,
        Conv3dBackpropFilter.dataFormat("NDHWC"));
    return List.of(dx, dw);
  }

  @SuppressWarnings("unchecked")
  private static List<Operand<?>> batchMatMul(Ops tf, BatchMatMul.Inputs in,
      List<Output<?>> dz) {
    Operand<TFloat32> x = (Operand<TFloat32>) in.x;
    Operand<TFloat32> y = (Operand<TFloat32>) in.y;
    Operand<TFloat32> g = (Operand<TFloat32>) dz.get(0);
    long[] xs = x.shape().asArray();
    long[] ys = y.shape().asArray();
    if (xs.length != ys.length || !Arrays.equals(Arrays.copyOf(xs, xs.length - 2),
        Arrays.copyOf(ys, ys.length - 2))) {
      throw new IllegalArgumentException("BatchMatMul gradient: batch dimensions must be equal, "
          + "got " + Arrays.toString(xs) + " and " + Arrays.toString(ys));
    }
    boolean ax = in.adjX;
    boolean ay = in.adjY;
    Operand<TFloat32> dx;
    Operand<TFloat32> dyy;
    if (!ax && !ay) {
      dx = bmm(tf, g, y, false, true);
      dyy = bmm(tf, x, g, true, false);
    } else if (!ax) {
      dx = bmm(tf, g, y, false, false);
      dyy = bmm(tf, g, x, true, false);
    } else if (!ay) {
      dx = bmm(tf, y, g, false, true);
      dyy = bmm(tf, x, g, false, false);
    } else {
      dx = bmm(tf, y, g, true, true);
      dyy = bmm(tf, g, x, true, true);
    }
    return List.of(dx, dyy);
  }

  private static Operand<TFloat32> bmm(Ops tf, Operand<TFloat32> a, Operand<TFloat32> b,
      boolean adjA, boolean adjB) {
    return tf.train.batchMatMul(a, b, TFloat32.class, BatchMatMul.adjX(adjA),
        BatchMatMul.adjY(adjB));
  }
}
