package dev.lms4j.train.models;

import dev.lms4j.tf.TrainingGraph;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.types.TFloat32;

/**
 * {@code mlp}: a deep fully connected ReLU network on flat inputs.
 *
 * <p>Options: {@code layers} hidden layers (default 8) of {@code width} units (1024) on inputs of
 * {@code input} features (784), {@code classes} outputs (10), SGD step {@code lr} (0.01) and
 * initialiser {@code seed} (42). Hidden kernels are He-initialised; the logits kernel is scaled
 * down by {@link GraphBuilder#LOGITS_GAIN} so the first loss is close to {@code ln(classes)}.
 */
final class MlpModel extends ZooModel {

  private static final String NAME = "mlp";

  MlpModel() {
    super(NAME, "deep MLP: <layers> x dense(<width>)+ReLU on <input> features, softmax over "
        + "<classes>",
        "layers", "8", "width", "1024", "input", "784", "classes", "10", "lr", "0.01",
        "seed", "42");
  }

  @Override
  TrainingGraph graph(int batch, Options o) {
    int layers = o.intValue("layers", 0, 1000);
    int width = o.intValue("width", 1, 1 << 16);
    int input = o.intValue("input", 1, 1 << 24);
    int classes = o.intValue("classes", 2, 1 << 20);

    try (GraphBuilder b = builder(o)) {
      Placeholder<TFloat32> x = b.placeholder("x", Shape.of(batch, input));
      Placeholder<TFloat32> labels = b.placeholder("labels", Shape.of(batch, classes));
      Ops scope = b.ops().withSubScope(NAME);
      Operand<TFloat32> h = x;
      int fanIn = input;
      for (int i = 0; i < layers; i++) {
        Ops layer = scope.withSubScope("dense" + i);
        h = layer.withName("relu").nn.relu(dense(b, layer, h, fanIn, width, 1.0));
        fanIn = width;
      }
      Operand<TFloat32> logits =
          dense(b, scope.withSubScope("logits"), h, fanIn, classes, GraphBuilder.LOGITS_GAIN);
      return b.finish(NAME, logits, x, labels);
    }
  }

  private static Operand<TFloat32> dense(GraphBuilder b, Ops layer, Operand<TFloat32> in,
      int fanIn, int units, double gain) {
    var kernel = b.heWeight(layer, "kernel", Shape.of(fanIn, units), fanIn, gain);
    var bias = b.zeros(layer, "bias", Shape.of(units));
    return layer.nn.biasAdd(layer.linalg.matMul(in, kernel), bias);
  }
}
