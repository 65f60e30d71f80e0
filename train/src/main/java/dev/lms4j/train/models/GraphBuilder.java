package dev.lms4j.train.models;

import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.TruncatedNormal;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;

/**
 * The machinery shared by the models: seeded variables with their initialisers, the loss, the
 * {@code accuracy} metric, the gradients, the update (plain SGD or SGD with momentum) and the
 * export to a {@link TrainingGraph}.
 *
 * <p>One builder builds one graph; {@link #finish} closes nothing, {@link #close} frees the graph.
 */
final class GraphBuilder implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(GraphBuilder.class);

  /**
   * Extra factor on the He scale of the final (logits) kernel. Without normalisation layers a
   * full-scale logits layer starts far from {@code ln(classes)} and the first SGD steps overshoot.
   */
  static final double LOGITS_GAIN = 0.1;

  /** Standard deviation of a unit normal truncated at two standard deviations. */
  private static final double TRUNCATED_STDDEV = 0.87962566103423978;

  private final Graph graph = new Graph();
  private final Ops tf = Ops.create(graph);
  private final long seed;
  private final List<Variable<TFloat32>> variables = new ArrayList<>();
  private final List<Op> assigns = new ArrayList<>();
  private long parameters;

  /** Adam's decay rate of the first moment (TensorFlow's default). */
  static final float ADAM_BETA1 = 0.9f;
  /** Adam's decay rate of the second moment (TensorFlow's default). */
  static final float ADAM_BETA2 = 0.999f;
  /** Adam's epsilon (TensorFlow's default). */
  static final float ADAM_EPSILON = 1e-8f;

  /** The update rules the zoo's models can be trained with (model option {@code optimizer}). */
  enum Kind {
    /** {@code ApplyGradientDescent}. */
    SGD,
    /** {@code ApplyMomentum} with one accumulator per variable. */
    MOMENTUM,
    /** {@code ApplyAdam} with two moment slots per variable and the two beta powers. */
    ADAM;

    /** The option value, e.g. {@code adam}. */
    String optionName() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /**
   * The update rule.
   *
   * @param kind         SGD, momentum or Adam
   * @param learningRate the step size, positive
   * @param momentum     the momentum of {@code ApplyMomentum} (ignored by the other kinds), with
   *                     one zero-initialised accumulator variable per trainable variable (see
   *                     {@link #slot})
   */
  record Optimizer(Kind kind, float learningRate, float momentum) {
    static Optimizer sgd(float learningRate) {
      return new Optimizer(Kind.SGD, learningRate, 0f);
    }
  }

  private final Optimizer optimizer;

  /** A builder whose {@link #finish} methods without an explicit rule use {@code optimizer}. */
  GraphBuilder(long seed, Optimizer optimizer) {
    this.seed = seed;
    this.optimizer = optimizer;
  }

  GraphBuilder(long seed) {
    this(seed, Optimizer.sgd(0.01f));
  }

  /** The root (unscoped) op factory. */
  Ops ops() {
    return tf;
  }

  /** A float32 placeholder with a full static shape. */
  Placeholder<TFloat32> placeholder(String name, Shape shape) {
    return tf.withName(name).placeholder(TFloat32.class, Placeholder.shape(shape));
  }

  /**
   * A weight variable {@code scope/name} initialised from a seeded truncated normal with He
   * scaling: standard deviation {@code gain * sqrt(2 / fanIn)}.
   */
  Variable<TFloat32> heWeight(Ops scope, String name, Shape shape, long fanIn, double gain) {
    Variable<TFloat32> v = scope.withName(name).variable(shape, TFloat32.class);
    Ops init = scope.withSubScope(name + "_init");
    // seed2 = 1-based variable index: every variable gets its own fixed stream
    Operand<TFloat32> unit = init.random.truncatedNormal(init.constant(shape.asArray()),
        TFloat32.class, TruncatedNormal.seed(seed),
        TruncatedNormal.seed2((long) variables.size() + 1));
    float stddev = (float) (gain * Math.sqrt(2.0 / fanIn) / TRUNCATED_STDDEV);
    register(v, init.assign(v, init.math.mul(unit, init.constant(stddev))));
    return v;
  }

  /** A variable {@code scope/name} initialised to zeros (for biases). */
  Variable<TFloat32> zeros(Ops scope, String name, Shape shape) {
    Variable<TFloat32> v = scope.withName(name).variable(shape, TFloat32.class);
    Ops init = scope.withSubScope(name + "_init");
    register(v, init.assign(v, init.fill(init.constant(shape.asArray()), init.constant(0f))));
    return v;
  }

  /** A variable {@code scope/name} initialised to ones (for normalisation scales). */
  Variable<TFloat32> ones(Ops scope, String name, Shape shape) {
    Variable<TFloat32> v = scope.withName(name).variable(shape, TFloat32.class);
    Ops init = scope.withSubScope(name + "_init");
    register(v, init.assign(v, init.fill(init.constant(shape.asArray()), init.constant(1f))));
    return v;
  }

  /**
   * A weight variable {@code scope/name} initialised from a seeded normal truncated at two
   * standard deviations, with standard deviation {@code stddev} (GPT-2 uses 0.02).
   */
  Variable<TFloat32> normalWeight(Ops scope, String name, Shape shape, double stddev) {
    Variable<TFloat32> v = scope.withName(name).variable(shape, TFloat32.class);
    Ops init = scope.withSubScope(name + "_init");
    Operand<TFloat32> unit = init.random.truncatedNormal(init.constant(shape.asArray()),
        TFloat32.class, TruncatedNormal.seed(seed),
        TruncatedNormal.seed2((long) variables.size() + 1));
    float scale = (float) (stddev / TRUNCATED_STDDEV);
    register(v, init.assign(v, init.math.mul(unit, init.constant(scale))));
    return v;
  }

  /**
   * A zero-initialised optimizer slot {@code train/<variable with _ for />_<name>} of
   * {@code v}'s shape, initialised by {@code init} but neither trained nor counted as a
   * parameter.
   */
  private Variable<TFloat32> slot(Ops train, Variable<TFloat32> v, String name) {
    String full = v.op().name().replace('/', '_') + "_" + name;
    Shape shape = v.shape();
    Variable<TFloat32> s = train.withName(full).variable(shape, TFloat32.class);
    Ops init = train.withSubScope(full + "_init");
    assigns.add(init.assign(s, init.fill(init.constant(shape.asArray()), init.constant(0f))));
    return s;
  }

  /**
   * The scalar {@code accuracy}: the batch mean of {@code argmax(logits) == argmax(labels)}
   * (helper ops under {@code metrics/}).
   */
  private void accuracy(Operand<TFloat32> logits, Placeholder<TFloat32> labels) {
    Ops m = tf.withSubScope("metrics");
    Operand<TInt32> axis = m.constant(1);
    Operand<TFloat32> correct = m.dtypes.cast(m.math.equal(m.math.argMax(logits, axis),
        m.math.argMax(labels, axis)), TFloat32.class);
    tf.withName("accuracy").math.mean(correct, m.constant(0));
  }

  /**
   * The scalar {@code accuracy} over flat {@code [n]} class ids: the mean of
   * {@code predicted == expected} (helper ops under {@code metrics/}).
   */
  void accuracyOfIds(Operand<TInt64> predicted, Operand<TInt64> expected) {
    Ops m = tf.withSubScope("metrics");
    Operand<TFloat32> correct = m.dtypes.cast(m.math.equal(predicted, expected), TFloat32.class);
    tf.withName("accuracy").math.mean(correct, m.constant(0));
  }

  private void register(Variable<TFloat32> v, Op assign) {
    variables.add(v);
    assigns.add(assign);
    parameters += v.shape().size();
  }

  /**
   * Adds loss, gradients, updates (the builder's update rule), {@code train_op} and {@code init},
   * and exports the graph.
   *
   * @param model  model name, for logging
   * @param logits the forward output, {@code [batch, classes]}
   * @param x      the input placeholder (named {@code x})
   * @param labels the one-hot label placeholder (named {@code labels})
   */
  TrainingGraph finish(String model, Operand<TFloat32> logits, Placeholder<TFloat32> x,
      Placeholder<TFloat32> labels) {
    return finish(model, logits, x, labels, optimizer);
  }

  /**
   * Adds gradients, updates (the builder's update rule), {@code train_op} and {@code init}, and
   * exports the graph; see {@link #finish(String, List, Operand, Optimizer)}.
   *
   * @param model model name, for logging
   * @param feeds the manifest's feeds, in order
   * @param loss  the scalar loss, an op named {@code loss}
   */
  TrainingGraph finish(String model, List<Manifest.Feed> feeds, Operand<TFloat32> loss) {
    return finish(model, feeds, loss, optimizer);
  }

  /**
   * Adds loss, {@code accuracy}, gradients, updates, {@code train_op} and {@code init}, and
   * exports the graph.
   *
   * @param model     model name, for logging
   * @param logits    the forward output, {@code [batch, classes]}
   * @param x         the input placeholder (named {@code x})
   * @param labels    the one-hot label placeholder (named {@code labels})
   * @param optimizer the update rule
   */
  TrainingGraph finish(String model, Operand<TFloat32> logits, Placeholder<TFloat32> x,
      Placeholder<TFloat32> labels, Optimizer optimizer) {
    Operand<TFloat32> xent = tf.nn.softmaxCrossEntropyWithLogits(logits, labels).loss();
    Operand<TFloat32> loss = tf.withName("loss").math.mean(xent, tf.constant(new int[] {0}));
    accuracy(logits, labels);
    return finish(model, List.of(feed(x, "normal"), feed(labels, "onehot")), loss, optimizer);
  }

  /** The manifest feed of a float32 placeholder with fill {@code fill}. */
  static Manifest.Feed feed(Placeholder<TFloat32> p, String fill) {
    return new Manifest.Feed(p.op().name(), "float32", p.shape().asArray(), fill);
  }

  /**
   * Adds gradients, updates, {@code train_op} and {@code init}, and exports the graph. The caller
   * has built the loss (the scalar op named {@code loss}) and the metric (the float32 scalar op
   * named {@code accuracy}).
   *
   * @param model     model name, for logging
   * @param feeds     the manifest's feeds, in order
   * @param loss      the scalar loss, an op named {@code loss}
   * @param optimizer the update rule
   */
  TrainingGraph finish(String model, List<Manifest.Feed> feeds, Operand<TFloat32> loss,
      Optimizer optimizer) {
    if (!loss.op().name().equals("loss") || graph.operation("accuracy") == null) {
      throw new IllegalStateException(model + ": the graph needs ops named loss and accuracy");
    }
    Output<?>[] vars = new Output<?>[variables.size()];
    for (int i = 0; i < vars.length; i++) {
      vars[i] = variables.get(i).asOutput();
    }
    Output<?>[] grads = graph.addGradients("gradients", new Output<?>[] {loss.asOutput()}, vars,
        null);

    Ops train = tf.withSubScope("train");
    Operand<TFloat32> lr = train.withName("learning_rate").constant(optimizer.learningRate());
    Operand<TFloat32> momentum = optimizer.kind() == Kind.MOMENTUM
        ? train.withName("momentum").constant(optimizer.momentum()) : null;
    Adam adam = optimizer.kind() == Kind.ADAM ? new Adam(train) : null;
    List<Op> updates = new ArrayList<>(vars.length);
    for (int i = 0; i < vars.length; i++) {
      Variable<TFloat32> v = variables.get(i);
      if (grads[i] == null) {
        throw new IllegalStateException(model + ": variable " + v.op().name()
            + " does not affect the loss");
      }
      Ops update = train.withName(v.op().name().replace('/', '_'));
      Operand<TFloat32> grad = grads[i].expect(TFloat32.class);
      updates.add(switch (optimizer.kind()) {
        case SGD -> update.train.applyGradientDescent(v, lr, grad);
        case MOMENTUM -> update.train.applyMomentum(v, slot(train, v, "momentum"), lr, grad,
            momentum);
        case ADAM -> update.train.applyAdam(v, slot(train, v, "m"), slot(train, v, "v"),
            adam.beta1Power, adam.beta2Power, lr, adam.beta1, adam.beta2, adam.epsilon, grad);
      });
    }
    if (adam != null) {
      // the powers advance after every update has read them
      Ops after = train.withControlDependencies(List.copyOf(updates));
      updates.add(after.withName("beta1_power_update").assign(adam.beta1Power,
          after.math.mul(adam.beta1Power, adam.beta1)));
      updates.add(after.withName("beta2_power_update").assign(adam.beta2Power,
          after.math.mul(adam.beta2Power, adam.beta2)));
    }
    tf.withControlDependencies(updates).withName("train_op").noOp();
    tf.withControlDependencies(assigns).withName("init").noOp();

    GraphDef def = canonical(graph.toGraphDef());
    Manifest manifest = new Manifest(feeds, "loss:0", "train_op", "init",
        Map.of("accuracy", "accuracy:0"));
    LOG.debug("built {}: {} ops, {} variables, {} parameters", model, def.getNodeCount(),
        variables.size(), parameters);
    return new TrainingGraph(def, manifest);
  }

  /**
   * Adam's shared state: the decay rates, epsilon, and the variables {@code train/beta1_power}
   * and {@code train/beta2_power} (initialised to the rates, optimizer state like the slots).
   */
  private final class Adam {
    final Operand<TFloat32> beta1;
    final Operand<TFloat32> beta2;
    final Operand<TFloat32> epsilon;
    final Variable<TFloat32> beta1Power;
    final Variable<TFloat32> beta2Power;

    Adam(Ops train) {
      beta1 = train.withName("beta1").constant(ADAM_BETA1);
      beta2 = train.withName("beta2").constant(ADAM_BETA2);
      epsilon = train.withName("epsilon").constant(ADAM_EPSILON);
      beta1Power = power(train, "beta1_power", ADAM_BETA1);
      beta2Power = power(train, "beta2_power", ADAM_BETA2);
    }

    private Variable<TFloat32> power(Ops train, String name, float initial) {
      Variable<TFloat32> p = train.withName(name).variable(Shape.scalar(), TFloat32.class);
      Ops init = train.withSubScope(name + "_init");
      assigns.add(init.assign(p, init.constant(initial)));
      return p;
    }
  }

  /**
   * Re-inserts every node's attributes in key order. The C API hands the GraphDef over with each
   * attr map in hash order, which differs from build to build; protobuf-java then serialises maps
   * in insertion order, so without this two equal graphs would not be byte-identical.
   */
  private static GraphDef canonical(GraphDef def) {
    GraphDef.Builder b = def.toBuilder();
    for (NodeDef.Builder node : b.getNodeBuilderList()) {
      Map<String, AttrValue> sorted = new TreeMap<>(node.getAttrMap());
      node.clearAttr().putAllAttr(sorted);
    }
    return b.build();
  }

  @Override
  public void close() {
    graph.close();
  }
}
