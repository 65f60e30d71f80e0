package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Variable;
import org.tensorflow.types.TFloat32;

/**
 * Init fills that are the same computation are held once ({@link InitHeldConstants.Keys}), as
 * TensorFlow's graph optimizer merges them before it folds them: the two slots of a variable
 * filled as tensorflow-framework's optimizers fill them, {@code Fill(Shape(var), Cast(Const 0))};
 * bias initialisers {@code Fill} of equal constants.
 */
class InitHeldConstantsMergeTest {
  @Test
  void theSameInitComputationIsHeldOnce() {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      List<Op> inits = new ArrayList<>();
      Variable<TFloat32> a = null;
      for (String name : List.of("a", "b")) {
        Variable<TFloat32> w = tf.withName(name).variable(Shape.of(64, 32), TFloat32.class);
        a = a == null ? w : a;
        for (String slot : List.of("m", "v")) {
          inits.add(slotFill(tf, w, name + "_" + slot, 0));
        }
      }
      // a third slot of a, filled with ones: another value, another constant
      inits.add(slotFill(tf, a, "a_ones", 1));
      for (String name : List.of("c1", "c2")) {
        Variable<TFloat32> c = tf.withName(name).variable(Shape.of(512), TFloat32.class);
        Ops ci = tf.withSubScope(name + "_init");
        inits.add(ci.assign(c, ci.fill(ci.constant(new long[] {512}), ci.constant(0f))));
      }
      tf.withControlDependencies(inits).withName("init").noOp();
      var gd = g.toGraphDef();

      Map<String, Long> held = InitHeldConstants.of(gd.getNodeList(), Set.of(), g::operation);
      // one of a's two slot fills, one of b's (another variable: not merged), the ones fill
      // (another value), one of the two equal bias fills
      assertThat(held).containsOnlyKeys("a_m_init/Fill", "b_m_init/Fill", "a_ones_init/Fill",
          "c1_init/Fill");
      assertThat(held).containsEntry("a_m_init/Fill", 64 * 32 * 4L)
          .containsEntry("c1_init/Fill", 512 * 4L);
    }
  }

  /**
   * What must not merge: computations that differ only by a control input, by the device asked
   * for, or by reading a random op (each random op stands for itself, whatever its attributes);
   * large {@code Const} values merge by value, under a short key.
   */
  @Test
  void computationsThatDifferDoNotMergeAndLargeConstantsMergeByValue() {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      var dims = tf.withName("dims").constant(new long[] {64, 32});
      var zero = tf.withName("zero").constant(0f);
      tf.withName("plain1").fill(dims, zero);
      tf.withName("plain2").fill(dims, zero);
      var other = tf.withName("other").noOp();
      tf.withName("gated").withControlDependencies(List.of(other)).fill(dims, zero);
      tf.withName("placed").fill(dims, zero);
      var scalar = tf.withName("scalar").constant(new long[] {});
      for (String r : List.of("rand1", "rand2")) {
        var u = tf.withName(r).random.randomUniform(scalar, TFloat32.class);
        tf.withName(r + "_fill").fill(dims, tf.withName(r + "_cast").dtypes.cast(u,
            TFloat32.class));
      }
      float[] values = new float[2048];
      java.util.Arrays.fill(values, 0.25f);
      tf.withName("big1").constant(values);
      tf.withName("big2").constant(values);
      values[7] = 0.5f;
      tf.withName("big3").constant(values);
      var gd = g.toGraphDef().toBuilder();
      for (var n : gd.getNodeBuilderList()) {
        if (n.getName().equals("placed")) {
          n.setDevice("/device:CPU:0");
        }
      }
      Map<String, org.tensorflow.proto.NodeDef> byName = new java.util.HashMap<>();
      gd.getNodeList().forEach(n -> byName.put(n.getName(), n));
      InitHeldConstants.Keys keys = new InitHeldConstants.Keys(byName);

      assertThat(keys.of("plain1"))
          .isEqualTo(keys.of("plain2"));
      assertThat(keys.of("gated"))
          .isNotEqualTo(keys.of("plain1"));
      assertThat(keys.of("placed"))
          .isNotEqualTo(keys.of("plain1"));
      // the same attributes and seeds: still two random draws
      assertThat(keys.of("rand1_fill"))
          .isNotEqualTo(keys.of("rand2_fill"));
      assertThat(keys.of("big1"))
          .isEqualTo(keys.of("big2"))
          .isNotEqualTo(keys.of("big3"));
      // 8 KiB of tensor content, keyed by its digest: the key stays short
      assertThat(keys.of("big1").length()).isLessThan(200);
    }
  }

  /** {@code Fill(Shape(w), Cast(Const value))} assigned to a new slot variable of w's shape. */
  private static Op slotFill(Ops tf, Variable<TFloat32> w, String slot, int value) {
    Variable<TFloat32> s = tf.withName(slot).variable(Shape.of(64, 32), TFloat32.class);
    Ops si = tf.withSubScope(slot + "_init");
    Operand<TFloat32> zero = si.dtypes.cast(si.constant(value), TFloat32.class);
    return si.assign(s, si.fill(si.shape(w), zero));
  }
}
