package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.VarHandleOp;
import org.tensorflow.op.core.Variable;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.types.TFloat32;

/**
 * Resource variables in the graph model, with hand-computed sizes: a variable W of
 * {@code [256, 128]} float32 = 131,072 bytes, read by {@code y = x . W} ({@code x} is
 * {@code [1, 256]}), loss {@code sum(y)}, updated by {@code ResourceApplyGradientDescent}.
 */
class ResourceVariablesTest {
  private static final long W = 256 * 128 * 4;

  @Test
  void aVariableHandleHoldsTheVariablesBytesAndItsReadIsAnAlias() {
    DataflowGraph g = model(build(true, false));
    Tensor handle = g.opOrThrow("W").output(0);
    assertThat(handle.bytes()).isEqualTo(W);
    assertThat(handle.persistent()).isTrue();
    assertThat(g.persistentBytes()).isEqualTo(W); // was 0: "0.0 MiB of learning parameters"
    // the read's only reader (the forward MatMul) runs before the update: no copy-on-write
    assertThat(g.opOrThrow("W_read").output(0).persistent()).isTrue();
  }

  @Test
  void aReadAliveAtTheUpdateCostsACopyOfTheVariable() {
    DataflowGraph dead = model(build(true, false));
    DataflowGraph alive = model(build(true, true));
    assertThat(alive.opOrThrow("W_read").output(0).persistent()).isFalse();
    assertThat(alive.opOrThrow("W_read").output(0).bytes()).isEqualTo(W);
    // dead: W (resident) + the gradient dW (131,072) at the gradient MatMul, + x and constants;
    // alive: the same plus the read's copy-on-write buffer, alive from the read to "late"
    // (measured on a 64 MiB variable: 128 MiB without the late reader, 192 MiB with it)
    long peakDead = MemorySimulator.simulate(dead, dead.topologicalOrder()).peakBytes();
    long peakAlive = MemorySimulator.simulate(alive, alive.topologicalOrder()).peakBytes();
    // + 8 bytes: "late"'s own axis constant [0, 1] (int32[2], resident like every constant)
    assertThat(peakAlive - peakDead).isEqualTo(W + 8);
    assertThat(peakDead).isBetween(2 * W, 2 * W + 4096);
  }

  @Test
  void refVariablesAreUpdatedInPlace() {
    DataflowGraph g = model(build(false, true));
    assertThat(g.persistentBytes()).isEqualTo(W);
    long peak = MemorySimulator.simulate(g, g.topologicalOrder()).peakBytes();
    assertThat(peak).isBetween(2 * W, 2 * W + 4096);
  }

  /**
   * Init assigns W a zero fill TensorFlow folds and holds: a resource variable adopts the held
   * constant's buffer (its first update copies it, {@link DataflowGraph#initShared()}); a ref
   * variable's {@code Assign} copies the value into a buffer of its own at init.
   */
  @Test
  void aResourceVariableAssignedAHeldFillSharesItsBufferUntilItsFirstUpdate() {
    assertThat(model(withFillInit(build(true, false), true)).initShared()).containsExactly("W");
    assertThat(model(withFillInit(build(false, false), false)).initShared()).isEmpty();
    // no init: nothing held, nothing shared
    assertThat(model(build(true, false)).initShared()).isEmpty();
  }

  /** {@code gd} with an init that assigns W a zero {@code Fill} of its shape. */
  private static GraphDef withFillInit(GraphDef gd, boolean resource) {
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      Ops tf = Ops.create(g);
      Operand<TFloat32> zeros = tf.withSubScope("W_init").withName("Fill").fill(
          tf.constant(new int[] {256, 128}), tf.constant(0f));
      if (resource) {
        tf.withName("W_init").assignVariableOp(g.operation("W").output(0), zeros);
      } else {
        tf.withName("W_init").assign(g.operation("W").<TFloat32>output(0), zeros);
      }
      return g.toGraphDef();
    }
  }

  private static DataflowGraph model(GraphDef gd) {
    return GraphImporter.importGraph(gd, Map.of(), -1, "gradients",
        Set.of("loss:0", "train_op"));
  }

  @SuppressWarnings("unchecked")
  private static GraphDef build(boolean resource, boolean lateReader) {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      var x = tf.withName("x").placeholder(TFloat32.class, Placeholder.shape(Shape.of(1, 256)));
      Operand<TFloat32> w;
      Operand<?> handle;
      if (resource) {
        VarHandleOp h = tf.withName("W").varHandleOp(TFloat32.class, Shape.of(256, 128),
            VarHandleOp.sharedName("W"));
        w = tf.withName("W_read").readVariableOp(h, TFloat32.class);
        handle = h;
      } else {
        Variable<TFloat32> v = tf.withName("W").variable(Shape.of(256, 128), TFloat32.class);
        w = v;
        handle = v;
      }
      Operand<TFloat32> y = tf.linalg.matMul(x, w);
      Operand<TFloat32> loss = tf.withName("loss").sum(y, tf.constant(new int[] {0, 1}));
      Output<?>[] gr = g.addGradients("gradients", new Output<?>[] {loss.asOutput()},
          new Output<?>[] {w.asOutput()}, null);
      Operand<TFloat32> grad = gr[0].expect(TFloat32.class);
      Op up = resource
          ? tf.withName("update").train.resourceApplyGradientDescent(handle, tf.constant(0.1f),
              grad)
          : tf.withName("update").train.applyGradientDescent((Variable<TFloat32>) handle,
              tf.constant(0.1f), grad);
      List<Op> deps = new ArrayList<>(List.of(up));
      if (lateReader) {
        deps.add(tf.withControlDependencies(List.of(up)).withName("late").sum(w,
            tf.constant(new int[] {0, 1})));
      }
      tf.withControlDependencies(deps).withName("train_op").noOp();
      return g.toGraphDef();
    }
  }
}
