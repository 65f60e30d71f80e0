package dev.lms4j.checkpoint;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Variable;

/** Graphs with one variable per dtype and two initializers holding different values. */
final class TestGraphs {
  private TestGraphs() {}

  /** The variables of {@link #allDtypes}: name -> (dtype, shape). */
  static final Map<String, Object[]> VARS = new LinkedHashMap<>();

  static {
    VARS.put("f32", new Object[] {DType.FLOAT32, new long[] {3, 5}});
    VARS.put("f64", new Object[] {DType.FLOAT64, new long[] {4}});
    VARS.put("i32", new Object[] {DType.INT32, new long[] {2, 3}});
    VARS.put("i64", new Object[] {DType.INT64, new long[] {5}});
    VARS.put("scope/b", new Object[] {DType.BOOL, new long[] {7}});
    VARS.put("u8", new Object[] {DType.UINT8, new long[] {3, 3}});
    VARS.put("scalar", new Object[] {DType.FLOAT32, new long[] {}});
  }

  static List<String> names() {
    return new ArrayList<>(VARS.keySet());
  }

  /**
   * A graph with the variables of {@link #VARS}; op {@code init_a} assigns values made from seed
   * 1, {@code init_b} from seed 2. Float values include a NaN with a payload, -0.0 and
   * subnormals, so only a bit-exact round trip passes.
   */
  static Graph allDtypes() {
    Graph g = new Graph();
    Ops tf = Ops.create(g);
    List<Op> a = new ArrayList<>();
    List<Op> b = new ArrayList<>();
    for (Map.Entry<String, Object[]> e : VARS.entrySet()) {
      DType dt = (DType) e.getValue()[0];
      long[] shape = (long[]) e.getValue()[1];
      String name = e.getKey();
      Ops scoped = tf;
      String leaf = name;
      if (name.contains("/")) {
        scoped = tf.withSubScope(name.substring(0, name.indexOf('/')));
        leaf = name.substring(name.indexOf('/') + 1);
      }
      Variable<?> v = scoped.withName(leaf).variable(Shape.of(shape), dt.tensorClass());
      a.add(tf.assign(cast(v), cast(tf.constant(dt.tensorClass(), Shape.of(shape),
          DataBuffers.of(bytes(dt, shape, 1))))));
      b.add(tf.assign(cast(v), cast(tf.constant(dt.tensorClass(), Shape.of(shape),
          DataBuffers.of(bytes(dt, shape, 2))))));
    }
    tf.withControlDependencies(a).withName("init_a").noOp();
    tf.withControlDependencies(b).withName("init_b").noOp();
    return g;
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static org.tensorflow.Operand cast(org.tensorflow.Operand o) {
    return o;
  }

  /** Deterministic bytes for a tensor of dtype/shape. */
  static byte[] bytes(DType dt, long[] shape, long seed) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    Random r = new Random(seed * 31 + dt.ordinal());
    ByteBuffer bb = ByteBuffer.allocate((int) (n * dt.byteSize())).order(ByteOrder.nativeOrder());
    for (int i = 0; i < n; i++) {
      switch (dt) {
        case FLOAT32 -> bb.putFloat(i == 0 ? Float.intBitsToFloat(0x7fc00123)
            : i == 1 ? -0.0f : i == 2 ? Float.MIN_VALUE : (float) r.nextGaussian());
        case FLOAT64 -> bb.putDouble(i == 0 ? Double.longBitsToDouble(0x7ff8000000000abcL)
            : i == 1 ? -0.0 : r.nextGaussian());
        case INT32 -> bb.putInt(i == 0 ? Integer.MIN_VALUE : r.nextInt());
        case INT64 -> bb.putLong(i == 0 ? Long.MAX_VALUE : r.nextLong());
        case BOOL -> bb.put((byte) (r.nextBoolean() ? 1 : 0));
        case UINT8 -> bb.put((byte) r.nextInt(256));
        default -> throw new IllegalArgumentException(dt.toString());
      }
    }
    return bb.array();
  }

  /** The current bytes of each variable, by name. */
  static Map<String, byte[]> values(Session s, List<String> names) {
    Map<String, byte[]> out = new LinkedHashMap<>();
    Session.Runner r = s.runner();
    names.forEach(n -> r.fetch(n));
    try (Result res = r.run()) {
      for (int i = 0; i < names.size(); i++) {
        ByteBuffer d = TensorView.of(names.get(i), res.get(i)).data();
        byte[] b = new byte[d.remaining()];
        d.get(b);
        out.put(names.get(i), b);
      }
    }
    return out;
  }
}
