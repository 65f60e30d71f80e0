package dev.lms4j.examples;

import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.OptimizerEdges;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.WorkerProcess;
import dev.lms4j.train.Callback;
import dev.lms4j.train.CheckpointCallback;
import dev.lms4j.train.LmsCallback;
import dev.lms4j.train.Logs;
import dev.lms4j.train.ProgressCallback;
import dev.lms4j.train.Trainer;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.FashionMnist;
import dev.lms4j.train.data.SyntheticDataset;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.framework.optimizers.Adam;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.TruncatedNormal;
import org.tensorflow.types.TFloat32;

/**
 * A CNN for Fashion-MNIST built with TF Java's {@code Ops} and trained with the framework's
 * {@code Adam}, then trained by lms4j's {@code Trainer} under a memory budget with the LMS and
 * checkpoint callbacks.
 *
 * <p>Arguments (all optional): {@code --steps N} (default 20), {@code --budget SIZE|off}
 * (default 64MiB; sizes as 48MiB, 1GiB or bytes), {@code --data-dir DIR} (Fashion-MNIST IDX
 * files; default /usr/share/datasets/fashion-mnist, synthetic data when absent),
 * {@code --checkpoint-dir DIR} (default target/checkpoints). Exit codes: 0 trained, 1 the run
 * failed (e.g. out of memory), 2 bad arguments.
 *
 * <p>The budget is real: this process starts a worker JVM whose TensorFlow allocator is limited
 * to it ({@code TF_CPU_ALLOCATOR_USE_BFC=true}, {@code TF_CPU_BFC_MEM_LIMIT_IN_MB}), as lms4j's
 * own command line does, and the worker trains.
 */
public final class AdamCnnExample {

  static final int BATCH = 64;

  /**
   * The share of the budget the planner may fill. The rest is for what it does not model: the
   * oneDNN convolution gradients ask for about 21 MiB of scratch at batch 64 (measured: 48 MiB
   * ran out of memory in {@code Conv2DBackpropFilter} for a step simulated at 37 MiB).
   */
  static final double MEM_RATIO = 0.5;

  private AdamCnnExample() {}

  /** Parsed arguments. */
  record Args(int steps, long budgetBytes, Path dataDir, Path checkpointDir, boolean inWorker) {}

  /**
   * Runs the example.
   *
   * @param argv the arguments (see the class doc)
   */
  public static void main(String[] argv) throws Exception {
    Args a;
    try {
      a = parse(argv);
    } catch (IllegalArgumentException e) {
      System.err.println("error: " + e.getMessage());
      System.exit(2);
      return;
    }
    System.exit(a.inWorker() ? train(a) : supervise(argv, a));
  }

  /** Starts this class again in a worker JVM limited to the budget and relays its output. */
  private static int supervise(String[] argv, Args a) throws Exception {
    long mib = a.budgetBytes() > 0 ? Math.max(1, a.budgetBytes() >> 20)
        : BudgetedRunner.UNBUDGETED_MIB;
    List<String> args = new ArrayList<>(Arrays.asList(argv));
    args.add("--in-worker");
    System.out.println("Training in a worker JVM whose TensorFlow allocator is limited to "
        + (a.budgetBytes() > 0 ? mib + " MiB" : "nothing (no budget)"));
    WorkerProcess.Outcome w = WorkerProcess.run(AdamCnnExample.class.getName(), args, mib,
        Duration.ofMinutes(30), event -> { }, System.out::println);
    if (w.oom()) {
      System.out.println("Out of memory under " + mib + " MiB: " + w.message());
      return 1;
    }
    if (w.exitCode() != 0) {
      System.out.println("The worker failed: " + w.message());
      return w.exitCode() == 2 ? 2 : 1;
    }
    return 0;
  }

  /** Builds the model, then trains and evaluates it (inside the budgeted worker). */
  private static int train(Args a) throws Exception {
    // 1. the model, as any TF Java user builds it: Ops, variables, the framework's Adam
    TrainingGraph built = buildCnn(BATCH, 1e-3f);
    // 2. the framework's Adam makes every update wait for every gradient; relax that (each
    //    update then waits only for the ops that read its own variable: same losses, less memory)
    OptimizerEdges.Result relaxed = OptimizerEdges.relax(built);
    TrainingGraph model = new TrainingGraph(relaxed.graphDef(), built.manifest());
    System.out.printf(Locale.ROOT, "Model: %d ops; %d of Adam's control edges relaxed, %d kept "
        + "for variable reads%n", model.graphDef().getNodeCount(), relaxed.removedEdges(),
        relaxed.addedEdges());

    // 3. data: Fashion-MNIST when installed, seeded synthetic images otherwise
    Dataset train;
    Dataset test;
    if (FashionMnist.available(a.dataDir())) {
      train = FashionMnist.train(a.dataDir());
      test = FashionMnist.test(a.dataDir());
      System.out.println("Data: Fashion-MNIST from " + a.dataDir());
    } else {
      Dataset all = SyntheticDataset.forManifest(model.manifest(), a.steps() * BATCH + 1000, 42);
      train = all.slice(0, a.steps() * BATCH);
      test = all.slice(a.steps() * BATCH, all.size());
      System.out.println("Data: synthetic (no Fashion-MNIST in " + a.dataDir() + ")");
    }
    train = train.slice(0, Math.min(train.size(), a.steps() * BATCH));
    test = test.slice(0, Math.min(test.size(), 1000));

    // 4. lms4j's trainer with the LMS callback (under the budget) and a checkpoint callback
    List<Callback> callbacks = new ArrayList<>();
    LmsCallback lms = a.budgetBytes() > 0
        ? new LmsCallback(Lms.builder().budget(a.budgetBytes()).memRatio(MEM_RATIO).build())
        : null;
    if (lms != null) {
      callbacks.add(lms);
    }
    callbacks.add(new ProgressCallback());
    try (CheckpointBackend files = CheckpointBackends.open("files",
            "dir=" + a.checkpointDir().toAbsolutePath() + ",keep=2");
         CheckpointCallback ckpt = CheckpointCallback.builder(files)
             .everyBatches(Math.max(1, a.steps() / 2)).build();
         Trainer trainer = new Trainer(model)) {
      callbacks.add(ckpt);
      List<Logs> epochs;
      try {
        epochs = trainer.fit(train, 1, callbacks.toArray(Callback[]::new));
      } catch (PlanningException e) {
        System.out.println("LMS: " + e.getMessage());
        return 1;
      }
      Logs result = trainer.evaluate(test);
      if (lms != null) {
        LmsResult r = lms.resultOrThrow();
        System.out.printf(Locale.ROOT, "LMS: %s; predicted peak %.1f MiB -> %.1f MiB under a "
            + "budget of %.1f MiB%n", r.rewritten() ? r.plan().swapOuts().size() + " swap-outs"
            : "not needed", r.predictedPeakBefore() / 1048576.0,
            r.predictedPeakAfter() / 1048576.0, a.budgetBytes() / 1048576.0);
      }
      System.out.printf(Locale.ROOT, "Trained %d steps: loss %.4f; test loss %.4f, accuracy "
          + "%.2f%% on %d images%n", train.size() / BATCH, epochs.get(0).loss(), result.loss(),
          100 * result.metric("accuracy"), result.samples());
      System.out.println("Checkpoints: " + files.list().size() + " in " + a.checkpointDir()
          + " (" + ckpt.variables().size() + " variables each)");
    }
    return 0;
  }

  /**
   * The CNN: conv5x5(32)+ReLU, 2x2 max pool, conv5x5(64)+ReLU, 2x2 max pool, dense(256)+ReLU,
   * dense(10); softmax cross entropy; the framework's Adam.
   *
   * <p>Two things TF Java's framework asks of such a graph: variable names hold no '/' (Adam
   * names its slots {@code <variable>-m}, and {@code Ops.withName} refuses a '/' in that name,
   * so {@code withSubScope("conv1").withName("kernel")} fails), and the initialisers run through
   * the framework's own {@code Init} NoOp, the manifest's init op.
   */
  static TrainingGraph buildCnn(int batch, float learningRate) {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, 28, 28, 1)));
      Placeholder<TFloat32> labels = tf.withName("labels").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(batch, 10)));
      Weights w = new Weights(tf);
      Operand<TFloat32> h = pool(tf, conv(tf, w, "conv1", x, 1, 32));
      h = pool(tf, conv(tf, w, "conv2", h, 32, 64));
      h = tf.reshape(h, tf.constant(new long[] {batch, 7 * 7 * 64}));
      h = tf.nn.relu(dense(tf, w, "dense1", h, 7 * 7 * 64, 256));
      Operand<TFloat32> logits = dense(tf, w, "logits", h, 256, 10);
      Operand<TFloat32> loss = tf.withName("loss").math.mean(
          tf.nn.softmaxCrossEntropyWithLogits(logits, labels).loss(), tf.constant(0));
      Operand<TFloat32> correct = tf.dtypes.cast(tf.math.equal(
          tf.math.argMax(logits, tf.constant(1)), tf.math.argMax(labels, tf.constant(1))),
          TFloat32.class);
      tf.withName("accuracy").math.mean(correct, tf.constant(0));
      new Adam(g, learningRate).minimize(loss, "train_op");

      Manifest manifest = new Manifest(List.of(
          new Manifest.Feed("x", "float32", new long[] {batch, 28, 28, 1}, "normal"),
          new Manifest.Feed("labels", "float32", new long[] {batch, 10}, "onehot")),
          "loss", "train_op", "Init", java.util.Map.of("accuracy", "accuracy"));
      return new TrainingGraph(g.toGraphDef(), manifest);
    }
  }

  private static Operand<TFloat32> conv(Ops tf, Weights w, String name, Operand<TFloat32> in,
      long cin, long cout) {
    Variable<TFloat32> kernel = w.normal(name + "_kernel", Shape.of(5, 5, cin, cout), 25 * cin);
    Variable<TFloat32> bias = w.zeros(name + "_bias", Shape.of(cout));
    return tf.nn.relu(tf.nn.biasAdd(tf.nn.conv2d(in, kernel, List.of(1L, 1L, 1L, 1L), "SAME"),
        bias));
  }

  private static Operand<TFloat32> pool(Ops tf, Operand<TFloat32> in) {
    return tf.nn.maxPool(in, tf.constant(new int[] {1, 2, 2, 1}),
        tf.constant(new int[] {1, 2, 2, 1}), "VALID");
  }

  private static Operand<TFloat32> dense(Ops tf, Weights w, String name, Operand<TFloat32> in,
      long fanIn, long units) {
    Variable<TFloat32> kernel = w.normal(name + "_kernel", Shape.of(fanIn, units), fanIn);
    Variable<TFloat32> bias = w.zeros(name + "_bias", Shape.of(units));
    return tf.nn.biasAdd(tf.linalg.matMul(in, kernel), bias);
  }

  /**
   * Variables initialised in the graph's init scope from seeded truncated normals (He scale) or
   * zeros, one after the other: the framework's {@code Init} would otherwise run every
   * initialiser at once.
   */
  private static final class Weights {
    private final Ops init;
    private Op previous;
    private long seed2;

    Weights(Ops tf) {
      this.init = tf.withInitScope();
    }

    Variable<TFloat32> normal(String name, Shape shape, long fanIn) {
      Ops s = scope();
      Operand<TFloat32> unit = s.random.truncatedNormal(s.constant(shape.asArray()),
          TFloat32.class, TruncatedNormal.seed(42L), TruncatedNormal.seed2(++seed2));
      return assign(s, name, shape, s.math.mul(unit, s.constant((float) Math.sqrt(2.0 / fanIn))));
    }

    Variable<TFloat32> zeros(String name, Shape shape) {
      Ops s = scope();
      return assign(s, name, shape, s.fill(s.constant(shape.asArray()), s.constant(0f)));
    }

    private Ops scope() {
      return previous == null ? init : init.withControlDependencies(List.of(previous));
    }

    private Variable<TFloat32> assign(Ops s, String name, Shape shape, Operand<TFloat32> value) {
      // the variable op without the chain's edge: a step reading it would run the previous
      // initialiser again
      Variable<TFloat32> v = init.withName(name).variable(shape, TFloat32.class);
      previous = s.assign(v, value);
      return v;
    }
  }

  static Args parse(String[] argv) {
    int steps = 20;
    long budget = 64L << 20;
    Path data = FashionMnist.DEFAULT_DIR;
    Path ckpt = Path.of("target", "checkpoints");
    boolean worker = false;
    for (int i = 0; i < argv.length; i++) {
      String k = argv[i];
      if (k.equals("--in-worker")) {
        worker = true;
        continue;
      }
      if (i + 1 >= argv.length) {
        throw new IllegalArgumentException("unknown argument or missing value: " + k);
      }
      String v = argv[++i];
      switch (k) {
        case "--steps" -> steps = positive(k, v);
        case "--budget" -> budget = v.equals("off") ? 0 : size(v);
        case "--data-dir" -> data = Path.of(v);
        case "--checkpoint-dir" -> ckpt = Path.of(v);
        default -> throw new IllegalArgumentException("unknown argument: " + k);
      }
    }
    return new Args(steps, budget, data, ckpt, worker);
  }

  private static int positive(String key, String v) {
    try {
      int n = Integer.parseInt(v);
      if (n >= 1) {
        return n;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException(key + " must be an integer >= 1, got '" + v + "'");
  }

  private static long size(String v) {
    String s = v.trim().toLowerCase(Locale.ROOT);
    long factor = 1;
    for (String[] u : new String[][] {{"gib", "1073741824"}, {"mib", "1048576"},
        {"kib", "1024"}}) {
      if (s.endsWith(u[0])) {
        factor = Long.parseLong(u[1]);
        s = s.substring(0, s.length() - u[0].length());
        break;
      }
    }
    try {
      double d = Double.parseDouble(s);
      if (d > 0) {
        return (long) (d * factor);
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException("--budget must be a size such as 48MiB or 1GiB, or off, "
        + "got '" + v + "'");
  }
}
