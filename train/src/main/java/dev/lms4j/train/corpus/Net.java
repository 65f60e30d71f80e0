package dev.lms4j.train.corpus;

import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.VarHandleOp;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.TruncatedNormal;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;

/**
 * What the corpus families share, written the way a TF Java 1.1 user writes a graph-mode training
 * graph: variables of one {@link Vars kind} with seeded initialisers, gradients from
 * {@code Graph.addGradients}, hand-written updates ({@link Update}) or the framework's optimizers,
 * an {@code init} NoOp and a {@code train_op}.
 *
 * <p>One net builds one graph; {@link #close} frees it.
 */
final class Net implements AutoCloseable {

  /** How variables are made. */
  enum Vars {
    /** {@code VariableV2} (ref-typed): forward ops read the ref, updates are {@code Apply*}. */
    REF,
    /**
     * {@code VarHandleOp} + {@code AssignVariableOp} initialisers; the forward pass reads each
     * variable once through {@code ReadVariableOp}; updates are {@code ResourceApply*}.
     */
    RESOURCE
  }

  /** A hand-written update rule. */
  enum Update {
    /** {@code ApplyGradientDescent} / {@code ResourceApplyGradientDescent}. */
    SGD,
    /** {@code ApplyMomentum} / {@code ResourceApplyMomentum} (momentum 0.9), one slot each. */
    MOMENTUM
  }

  /** One trainable variable: the handle (ref variable or resource) and the value the net reads. */
  record Param(String name, Shape shape, Operand<?> handle, Operand<TFloat32> value) {}

  private static final double TRUNCATED_STDDEV = 0.87962566103423978;

  final Graph graph = new Graph();
  final Ops tf = Ops.create(graph);
  final Vars vars;
  private final long seed;
  private final List<Param> params = new ArrayList<>();
  private final List<Op> inits = new ArrayList<>();
  private final List<Manifest.Feed> feeds = new ArrayList<>();

  Net(Vars vars, long seed) {
    this.vars = vars;
    this.seed = seed;
  }

  /** The trainable variables, in creation order. */
  List<Param> params() {
    return params;
  }

  /** A float32 placeholder, listed in the manifest with fill {@code fill}. */
  Placeholder<TFloat32> input(String name, Shape shape, String fill) {
    Placeholder<TFloat32> p = tf.withName(name).placeholder(TFloat32.class,
        Placeholder.shape(shape));
    feeds.add(new Manifest.Feed(name, "float32", shape.asArray(), fill));
    return p;
  }

  /** An int32 placeholder of ids in {@code [0, max)} (manifest fill {@code ids}). */
  Placeholder<TInt32> ids(String name, Shape shape, long max) {
    Placeholder<TInt32> p = tf.withName(name).placeholder(TInt32.class, Placeholder.shape(shape));
    feeds.add(Manifest.Feed.ids(name, "int32", shape.asArray(), max));
    return p;
  }

  /** A weight from a seeded truncated normal of standard deviation {@code stddev}. */
  Param normal(String name, Shape shape, double stddev) {
    Ops init = tf.withSubScope(name + "_init");
    Operand<TFloat32> unit = init.random.truncatedNormal(init.constant(shape.asArray()),
        TFloat32.class, TruncatedNormal.seed(seed),
        TruncatedNormal.seed2((long) params.size() + 1));
    return param(name, shape, init.math.mul(unit, init.constant((float) (stddev
        / TRUNCATED_STDDEV))));
  }

  /** A weight with He scaling for fan-in {@code fanIn}. */
  Param he(String name, Shape shape, long fanIn) {
    return normal(name, shape, Math.sqrt(2.0 / fanIn));
  }

  /** A variable filled with {@code value} (biases, scales). */
  Param filled(String name, Shape shape, float value) {
    Ops init = tf.withSubScope(name + "_init");
    return param(name, shape, init.fill(init.constant(shape.asArray()), init.constant(value)));
  }

  /** A variable of this net's kind, initialised by {@code initial}. */
  Param param(String name, Shape shape, Operand<TFloat32> initial) {
    Param p;
    if (vars == Vars.REF) {
      Variable<TFloat32> v = tf.withName(name).variable(shape, TFloat32.class);
      inits.add(tf.withName(name + "_assign").assign(v, initial));
      p = new Param(name, shape, v, v);
    } else {
      VarHandleOp h = tf.withName(name).varHandleOp(TFloat32.class, shape,
          VarHandleOp.sharedName(name));
      inits.add(tf.withName(name + "_assign").assignVariableOp(h, initial));
      p = new Param(name, shape, h, tf.withName(name + "_read").readVariableOp(h,
          TFloat32.class));
    }
    params.add(p);
    return p;
  }

  /** A zero-initialised optimizer slot of {@code p}'s kind and shape, not trainable. */
  private Operand<?> slot(Param p, String suffix) {
    String name = p.name() + "_" + suffix;
    Ops train = tf.withSubScope("train");
    Ops init = train.withSubScope(name + "_init");
    Operand<TFloat32> zeros = init.fill(init.constant(p.shape().asArray()), init.constant(0f));
    if (vars == Vars.REF) {
      Variable<TFloat32> v = train.withName(name).variable(p.shape(), TFloat32.class);
      inits.add(train.withName(name + "_assign").assign(v, zeros));
      return v;
    }
    VarHandleOp h = train.withName(name).varHandleOp(TFloat32.class, p.shape(),
        VarHandleOp.sharedName("train/" + name));
    inits.add(train.withName(name + "_assign").assignVariableOp(h, zeros));
    return h;
  }

  /** Registers an extra initialiser op (e.g. an optimizer's). */
  void initOp(Op op) {
    inits.add(op);
  }

  /**
   * The gradients of {@code loss} with respect to the variables' values (the ref variable, or the
   * resource variable's read), under the scope {@code gradients/}.
   */
  Output<?>[] gradients(Operand<TFloat32> loss, List<Operand<?>> of) {
    Output<?>[] xs = new Output<?>[of.size()];
    for (int i = 0; i < xs.length; i++) {
      xs[i] = of.get(i).asOutput();
    }
    Output<?>[] g = graph.addGradients("gradients", new Output<?>[] {loss.asOutput()}, xs, null);
    for (int i = 0; i < g.length; i++) {
      if (g[i] == null) {
        throw new IllegalStateException(of.get(i).op().name() + " does not affect the loss");
      }
    }
    return g;
  }

  /** One update op per parameter, hand-written (as a user without the framework would). */
  List<Op> updates(Operand<TFloat32> loss, List<Param> which, Update rule, float lr) {
    List<Operand<?>> values = new ArrayList<>();
    for (Param p : which) {
      values.add(p.value());
    }
    return updates(which, gradients(loss, values), 0, rule, lr);
  }

  /** One update op per parameter from gradients computed already ({@code grads[from + i]}). */
  List<Op> updates(List<Param> which, Output<?>[] grads, int from, Update rule, float lr) {
    return updates(which, grads, from, rule,
        tf.withSubScope("train").withName("learning_rate_" + from).constant(lr));
  }

  /** As above, at a learning rate computed in the graph (a schedule). */
  @SuppressWarnings("unchecked")
  List<Op> updates(List<Param> which, Output<?>[] grads, int from, Update rule,
      Operand<TFloat32> rate) {
    Ops train = tf.withSubScope("train");
    Operand<TFloat32> momentum = rule == Update.MOMENTUM
        ? train.withName("momentum_" + from).constant(0.9f) : null;
    List<Op> ups = new ArrayList<>();
    for (int i = 0; i < which.size(); i++) {
      Param p = which.get(i);
      Operand<TFloat32> g = grads[from + i].expect(TFloat32.class);
      Ops u = train.withName(p.name() + "_update");
      if (vars == Vars.REF) {
        Variable<TFloat32> v = (Variable<TFloat32>) p.handle();
        ups.add(rule == Update.SGD ? u.train.applyGradientDescent(v, rate, g)
            : u.train.applyMomentum(v, (Variable<TFloat32>) slot(p, "momentum"), rate, g,
                momentum));
      } else {
        ups.add(rule == Update.SGD ? u.train.resourceApplyGradientDescent(p.handle(), rate, g)
            : u.train.resourceApplyMomentum(p.handle(), slot(p, "momentum"), rate, g, momentum));
      }
    }
    return ups;
  }

  /** The scalar {@code loss}: the batch mean of the softmax cross entropy. */
  Operand<TFloat32> softmaxLoss(Operand<TFloat32> logits, Operand<TFloat32> onehot) {
    Operand<TFloat32> xent = tf.nn.softmaxCrossEntropyWithLogits(logits, onehot).loss();
    return tf.withName("loss").math.mean(xent, tf.constant(new int[] {0}));
  }

  /** The scalar {@code loss}: the mean squared error. */
  Operand<TFloat32> mseLoss(Operand<TFloat32> out, Operand<TFloat32> target) {
    Operand<TFloat32> d = tf.math.sub(out, target);
    Operand<TFloat32> sq = tf.math.mul(d, d);
    return tf.withName("loss").math.mean(tf.reshape(sq, tf.constant(new long[] {-1})),
        tf.constant(new int[] {0}));
  }

  /** {@code y = x . w + b} for a rank-2 {@code x}. */
  Operand<TFloat32> dense(Operand<TFloat32> x, String name, long in, long out) {
    Param w = he(name + "_w", Shape.of(in, out), in);
    Param b = filled(name + "_b", Shape.of(out), 0f);
    return tf.nn.biasAdd(tf.linalg.matMul(x, w.value()), b.value());
  }

  /**
   * Adds {@code train_op} (a NoOp after {@code updates}) and {@code init} (a NoOp after every
   * initialiser) and exports the graph with a canonical attribute order.
   */
  TrainingGraph finish(List<Op> updates) {
    tf.withControlDependencies(updates).withName("train_op").noOp();
    tf.withControlDependencies(inits).withName("init").noOp();
    return export();
  }

  /** Adds {@code init} only (for a {@code train_op} made elsewhere, e.g. by an optimizer). */
  TrainingGraph finishInitOnly() {
    // the framework's optimizers gather their slots' initialisers under a NoOp named Init
    org.tensorflow.GraphOperation frameworkInit = graph.operation("Init");
    if (frameworkInit != null) {
      inits.add(new org.tensorflow.op.core.NoOp(frameworkInit));
    }
    tf.withControlDependencies(inits).withName("init").noOp();
    return export();
  }

  private TrainingGraph export() {
    if (graph.operation("loss") == null || graph.operation("train_op") == null) {
      throw new IllegalStateException("a corpus graph needs ops named loss and train_op");
    }
    GraphDef.Builder b = graph.toGraphDef().toBuilder();
    for (NodeDef.Builder node : b.getNodeBuilderList()) {
      Map<String, AttrValue> sorted = new TreeMap<>(node.getAttrMap());
      node.clearAttr().putAllAttr(sorted);
    }
    return new TrainingGraph(b.build(), new Manifest(feeds, "loss:0", "train_op", "init"));
  }

  @Override
  public void close() {
    graph.close();
  }
}
