package dev.lms4j.train;

import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.SwapRewriter;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.data.Batch;
import dev.lms4j.train.data.Dataset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.RewriterConfig;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TFloat64;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;

/**
 * Trains and evaluates a {@link TrainingGraph} (a GraphDef plus its {@link Manifest}) on a
 * {@link Dataset}, with {@link Callback}s.
 *
 * <pre>{@code
 * TrainingGraph tg = ModelZoo.getOrThrow("lenet").build(100, Map.of());
 * try (Trainer trainer = new Trainer(tg)) {
 *   trainer.fit(FashionMnist.train(dir), 5, LmsCallback.of(256L << 20), new ProgressCallback());
 *   Logs test = trainer.evaluate(FashionMnist.test(dir));
 *   System.out.println(test.metric("accuracy"));
 * }
 * }</pre>
 *
 * <p>The session starts lazily, at the first {@link #fit} or {@link #evaluate}: first every
 * callback's {@link Callback#beforeSession} may rewrite the graph (LMS does), then the graph is
 * imported, the session created with {@link Config#session()} and the manifest's {@code init}
 * op run. Later calls reuse the session, so a second {@code fit} continues training.
 *
 * <p>Data: dataset component {@code i} feeds manifest feed {@code i}; the feeds must be float32
 * with the batch size as first dimension, and a sample's element count must equal the feed's
 * per-sample count (a {@code [28, 28, 1]} image may feed a {@code [batch, 784]} placeholder).
 * Training uses full batches only (the graph's batch size is static): the samples of a last,
 * partial batch are skipped in that epoch (with shuffling, different ones each epoch).
 * Evaluation covers every sample; see {@link #evaluate}. Each step fetches the loss and every
 * metric of the manifest and runs the train op.
 *
 * <p>A trainer holds a native graph and session: it must be closed; {@code close} is
 * idempotent. It is meant for one thread.
 */
public final class Trainer implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(Trainer.class);

  /**
   * Trainer settings.
   *
   * <pre>{@code
   * Trainer.Config c = Trainer.Config.defaults().withSeed(7).withShuffle(false);
   * }</pre>
   *
   * @param batchSize the expected batch size; 0 takes the manifest's (the graph's shapes are
   *                  static, so any other value must equal it)
   * @param seed      the seed of the per-epoch shuffling
   * @param session   the session config (default {@link SessionConfigs#lms()}: ops in the
   *                  caller's thread, grappler's dependency optimizer off, as LMS needs)
   * @param shuffle   whether training shuffles the samples every epoch
   */
  public record Config(int batchSize, long seed, ConfigProto session, boolean shuffle) {

    /**
     * Checks the values.
     *
     * @param batchSize the expected batch size, 0 for the manifest's
     * @param seed      the shuffling seed
     * @param session   the session config
     * @param shuffle   whether to shuffle
     */
    public Config {
      if (batchSize < 0) {
        throw new IllegalArgumentException("batch size must be >= 0 (0: the manifest's), got "
            + batchSize);
      }
      Objects.requireNonNull(session, "session config");
    }

    /**
     * The defaults: the manifest's batch size, seed 42, {@link SessionConfigs#lms()}, shuffled.
     *
     * @return the default config
     */
    public static Config defaults() {
      return new Config(0, 42, SessionConfigs.lms(), true);
    }

    /**
     * This config with another batch size.
     *
     * @param batchSize the batch size (0: the manifest's)
     * @return a new config
     */
    public Config withBatchSize(int batchSize) {
      return new Config(batchSize, seed, session, shuffle);
    }

    /**
     * This config with another shuffling seed.
     *
     * @param seed the seed
     * @return a new config
     */
    public Config withSeed(long seed) {
      return new Config(batchSize, seed, session, shuffle);
    }

    /**
     * This config with another session config.
     *
     * @param session the session config
     * @return a new config
     */
    public Config withSession(ConfigProto session) {
      return new Config(batchSize, seed, session, shuffle);
    }

    /**
     * This config with shuffling on or off.
     *
     * @param shuffle whether to shuffle
     * @return a new config
     */
    public Config withShuffle(boolean shuffle) {
      return new Config(batchSize, seed, session, shuffle);
    }
  }

  /**
   * How the trainer opens its session on the imported graph: {@code Session::new} locally by
   * default; a data-parallel worker opens one on its server's target instead.
   */
  @FunctionalInterface
  public interface SessionOpener {
    /**
     * Opens a session; the trainer owns and closes it.
     *
     * @param graph  the imported graph
     * @param config the session config ({@link Config#session()})
     * @return the new session
     */
    Session open(Graph graph, ConfigProto config);
  }

  private final Config config;
  private final SessionOpener opener;
  private final Manifest manifest;
  private final int batch;
  private final List<Shape> feedShapes;
  /** The fetches of a step: the loss, then each metric tensor. */
  private final List<String> fetches;
  private TrainingGraph current;
  private Graph graph;
  private Session session;
  private int epochsDone;
  /** Steps of epoch {@code epochsDone + 1} already trained before a resume, and their sums. */
  private int resumeSteps;
  private double[] resumeSums;
  /** Sums of the loss and metrics over the current epoch's steps so far. */
  private double[] epochSums = new double[0];
  private boolean closed;

  /**
   * A trainer with {@link Config#defaults()}.
   *
   * @param trainingGraph the graph and its manifest
   * @throws IllegalArgumentException when the manifest does not fit a trainer (see class doc)
   */
  public Trainer(TrainingGraph trainingGraph) {
    this(trainingGraph, Config.defaults());
  }

  /**
   * A trainer.
   *
   * @param trainingGraph the graph and its manifest
   * @param config        the settings
   * @throws IllegalArgumentException when the manifest does not fit a trainer (float32 feeds
   *                                  with one batch size, names present in the graph) or the
   *                                  config's batch size differs from the graph's
   */
  public Trainer(TrainingGraph trainingGraph, Config config) {
    this(trainingGraph, config, Session::new);
  }

  /**
   * A trainer whose session {@code opener} creates (e.g. on a TensorFlow server's target).
   *
   * @param trainingGraph the graph and its manifest
   * @param config        the settings
   * @param opener        opens the session on the imported graph
   * @throws IllegalArgumentException as {@link #Trainer(TrainingGraph, Config)}
   */
  public Trainer(TrainingGraph trainingGraph, Config config, SessionOpener opener) {
    this.current = Objects.requireNonNull(trainingGraph, "training graph");
    this.config = Objects.requireNonNull(config, "config");
    this.opener = Objects.requireNonNull(opener, "session opener");
    this.manifest = trainingGraph.manifest();
    if (manifest.feeds().isEmpty()) {
      throw new IllegalArgumentException("the manifest has no feeds: nothing to feed data to");
    }
    List<Shape> shapes = new ArrayList<>();
    long b = -1;
    for (Manifest.Feed f : manifest.feeds()) {
      if (!f.dtype().equals("float32")) {
        throw new IllegalArgumentException("feed '" + f.name() + "' is " + f.dtype()
            + "; the trainer feeds float32 only");
      }
      long[] s = f.shape();
      if (s.length == 0 || s[0] < 1) {
        throw new IllegalArgumentException("feed '" + f.name() + "' has shape "
            + Arrays.toString(s) + "; the trainer needs a batch dimension >= 1 first");
      }
      if (b >= 0 && s[0] != b) {
        throw new IllegalArgumentException("feeds disagree on the batch size: '"
            + manifest.feeds().get(0).name() + "' has " + b + ", '" + f.name() + "' has " + s[0]);
      }
      b = s[0];
      shapes.add(Shape.of(s));
    }
    if (b > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("batch size " + b + " is too large");
    }
    this.batch = (int) b;
    if (config.batchSize() != 0 && config.batchSize() != batch) {
      throw new IllegalArgumentException("the graph was built for batch " + batch + " (feed '"
          + manifest.feeds().get(0).name() + "' has shape "
          + Arrays.toString(manifest.feeds().get(0).shape()) + "), not " + config.batchSize()
          + ": build it with batch " + config.batchSize() + " or leave Config.batchSize at 0");
    }
    this.feedShapes = List.copyOf(shapes);
    List<String> f = new ArrayList<>();
    f.add(manifest.loss());
    f.addAll(manifest.metrics().values());
    this.fetches = List.copyOf(f);
    checkNames(trainingGraph.graphDef(), "the graph");
  }

  /**
   * Trains for {@code epochs} epochs; the first call starts the session (see class doc).
   *
   * @param train     the training data
   * @param epochs    the number of epochs, at least 1
   * @param callbacks hooks, called in this order
   * @return the logs of each epoch of this call
   * @throws IllegalArgumentException when the data does not fit the graph's feeds, holds fewer
   *                                  samples than one batch, or {@code epochs < 1}
   * @throws IllegalStateException    when the trainer is closed
   */
  public List<Logs> fit(Dataset train, int epochs, Callback... callbacks) {
    checkOpen();
    if (epochs < 1) {
      throw new IllegalArgumentException("epochs must be >= 1, got " + epochs);
    }
    List<Callback> cbs = callbacks(callbacks);
    checkData(train, "training");
    int steps = train.size() / batch;
    if (steps == 0) {
      throw new IllegalArgumentException("the training data has " + train.size()
          + " samples, fewer than one batch of " + batch);
    }
    start(cbs);
    FitInfo info = new FitInfo(epochsDone + 1, epochsDone + epochs, steps, batch);
    LOG.info("training {} epochs ({}..{}) of {} steps, batch {}, on {}", epochs,
        info.firstEpoch(), info.lastEpoch(), steps, batch, train);
    List<Logs> history = new ArrayList<>();
    try {
      for (Callback cb : cbs) {
        cb.onTrainBegin(info);
      }
      for (int e = 0; e < epochs; e++) {
        history.add(epoch(train, epochsDone + 1, info, cbs));
        epochsDone++;
      }
    } catch (RuntimeException | Error ex) {
      for (Callback cb : cbs) {
        try {
          cb.onTrainAborted(ex);
        } catch (RuntimeException suppressed) {
          ex.addSuppressed(suppressed);
        }
      }
      throw ex;
    }
    Logs last = history.get(history.size() - 1);
    for (Callback cb : cbs) {
      cb.onTrainEnd(last);
    }
    return Collections.unmodifiableList(history);
  }

  /**
   * Trains until epoch {@code lastEpoch} is complete, counting the epochs a resume (from
   * {@link Callback#onSessionStart}, e.g. {@code CheckpointCallback}) says are done: starts the
   * session first, then runs {@link #fit} for the epochs left, or nothing when none are.
   *
   * @param train     the training data
   * @param lastEpoch the epoch to end with, at least 1
   * @param callbacks hooks, as for {@link #fit}
   * @return the logs of each epoch trained by this call; empty when none was left
   * @throws IllegalArgumentException as {@link #fit}, or when {@code lastEpoch < 1}
   * @throws IllegalStateException    when the trainer is closed
   */
  public List<Logs> fitUntil(Dataset train, int lastEpoch, Callback... callbacks) {
    checkOpen();
    if (lastEpoch < 1) {
      throw new IllegalArgumentException("the last epoch must be >= 1, got " + lastEpoch);
    }
    start(callbacks(callbacks));
    if (epochsDone >= lastEpoch) {
      return List.of();
    }
    return fit(train, lastEpoch - epochsDone, callbacks);
  }

  private Logs epoch(Dataset train, int epoch, FitInfo info, List<Callback> cbs) {
    for (Callback cb : cbs) {
      cb.onEpochBegin(epoch);
    }
    List<Batch> batches = train.batches(batch, config.shuffle(), epochSeed(epoch));
    long t0 = System.nanoTime();
    double lossSum = 0;
    double[] metricSums = new double[manifest.metrics().size()];
    int first = 0;
    if (resumeSteps > 0) {
      // resumed inside this epoch: its first steps were trained before the checkpoint; the
      // sums carried over make the epoch's means the uninterrupted run's, bit for bit
      first = Math.min(resumeSteps, info.stepsPerEpoch());
      if (resumeSums != null && resumeSums.length == metricSums.length + 1) {
        lossSum = resumeSums[0];
        System.arraycopy(resumeSums, 1, metricSums, 0, metricSums.length);
      }
      resumeSteps = 0;
      resumeSums = null;
    }
    epochSums = new double[metricSums.length + 1];
    epochSums[0] = lossSum;
    System.arraycopy(metricSums, 0, epochSums, 1, metricSums.length);
    for (int i = first; i < info.stepsPerEpoch(); i++) {
      int step = i + 1;
      for (Callback cb : cbs) {
        cb.onBatchBegin(step);
      }
      long s0 = System.nanoTime();
      double[] values = run(batches.get(i), true);
      double seconds = (System.nanoTime() - s0) / 1e9;
      lossSum += values[0];
      for (int k = 0; k < metricSums.length; k++) {
        metricSums[k] += values[k + 1];
      }
      epochSums[0] = lossSum;
      System.arraycopy(metricSums, 0, epochSums, 1, metricSums.length);
      Logs logs = logs(values, 1, batch, seconds);
      for (Callback cb : cbs) {
        cb.onBatchEnd(step, logs);
      }
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    double[] sums = new double[metricSums.length + 1];
    sums[0] = lossSum;
    System.arraycopy(metricSums, 0, sums, 1, metricSums.length);
    Logs logs = logs(sums, info.stepsPerEpoch(), (long) info.stepsPerEpoch() * batch, seconds);
    for (Callback cb : cbs) {
      cb.onEpochEnd(epoch, logs);
    }
    LOG.info("epoch {}/{}: {} ({} s)", epoch, info.lastEpoch(), logs.summary(),
        String.format(java.util.Locale.ROOT, "%.1f", seconds));
    return logs;
  }

  /**
   * Evaluates the loss and the manifest's metrics over every sample of {@code test}, without
   * training; starts the session when no {@code fit} has (calling only the callbacks' session
   * hooks).
   *
   * <p>The graph's batch size is static, so a last, partial batch of {@code k} samples is padded
   * with copies of its last sample {@code s}; one more run on a batch made only of {@code s}
   * gives {@code s}'s own values, which are taken out again: the result is the exact mean over
   * the data set, provided that the loss and metrics are batch means of per-sample values (as
   * the zoo's cross entropy and accuracy are) and the graph has no batch-dependent ops (batch
   * normalisation in training mode).
   *
   * @param test      the data
   * @param callbacks hooks; only {@link Callback#beforeSession} and
   *                  {@link Callback#onSessionStart} are called, and only when this call starts
   *                  the session
   * @return the means over all samples and the throughput
   * @throws IllegalArgumentException when the data does not fit the graph's feeds or is empty
   * @throws IllegalStateException    when the trainer is closed
   */
  public Logs evaluate(Dataset test, Callback... callbacks) {
    checkOpen();
    List<Callback> cbs = callbacks(callbacks);
    checkData(test, "evaluation");
    if (test.size() == 0) {
      throw new IllegalArgumentException("the evaluation data is empty");
    }
    start(cbs);
    long t0 = System.nanoTime();
    double[] sums = new double[manifest.metrics().size() + 1];
    for (Batch b : test.batches(batch, false, 0)) {
      double[] v = run(b, false);
      int k = b.size();
      if (k < batch) {
        int[] last = b.indices();
        int[] repeated = new int[] {last[last.length - 1]};
        double[] only = run(Batch.of(test, repeated), false);
        for (int i = 0; i < v.length; i++) {
          v[i] = batch * v[i] - (batch - k) * only[i];
        }
      } else {
        for (int i = 0; i < v.length; i++) {
          v[i] *= batch;
        }
      }
      for (int i = 0; i < v.length; i++) {
        sums[i] += v[i];
      }
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    Logs logs = logs(sums, test.size(), test.size(), seconds);
    LOG.info("evaluation on {}: {}", test, logs.summary());
    return logs;
  }

  /**
   * The graph as run: after the callbacks' rewrites once the session has started, the graph
   * given to the constructor before.
   *
   * @return the training graph
   */
  public TrainingGraph trainingGraph() {
    return current;
  }

  /**
   * The live session, for callbacks (e.g. to save or restore variables); owned by the trainer,
   * do not close it.
   *
   * @return the session
   * @throws IllegalStateException before the session has started or after {@link #close}
   */
  public Session session() {
    checkOpen();
    if (session == null) {
      throw new IllegalStateException("the session starts with the first fit or evaluate");
    }
    return session;
  }

  /**
   * The live graph the session runs; owned by the trainer, do not close it.
   *
   * @return the graph
   * @throws IllegalStateException before the session has started or after {@link #close}
   */
  public Graph graph() {
    session();
    return graph;
  }

  /**
   * Sets how many epochs are already done, for a run resumed from a checkpoint: the next
   * {@code fit} starts at epoch {@code epochs + 1}, with that epoch's shuffling, so a run resumed
   * after epoch {@code k} sees the same batches as an uninterrupted one. Call it before
   * {@code fit}, or from {@link Callback#onSessionStart} (as {@code CheckpointCallback} does).
   *
   * @param epochs epochs completed, at least 0
   */
  public void resumeAfter(int epochs) {
    resumeAfter(epochs, 0, null);
  }

  /**
   * As {@link #resumeAfter(int)}, for a checkpoint taken inside epoch {@code epochs + 1}: the
   * next {@code fit} starts that epoch at step {@code steps + 1} (same shuffling, so the same
   * batches follow), and adds its losses and metrics to {@code sums} (the sums over the first
   * {@code steps} steps, as {@link #epochSums()} gave them when the checkpoint was taken), so the
   * epoch's means equal an uninterrupted run's.
   *
   * @param epochs epochs completed, at least 0
   * @param steps  steps of the next epoch already trained, at least 0
   * @param sums   the loss sum, then each metric's sum, over those steps; null when unknown
   *               (the epoch's means then cover only the steps trained after the resume)
   */
  public void resumeAfter(int epochs, int steps, double[] sums) {
    checkOpen();
    if (epochs < 0) {
      throw new IllegalArgumentException("epochs must be >= 0, got " + epochs);
    }
    if (steps < 0) {
      throw new IllegalArgumentException("steps must be >= 0, got " + steps);
    }
    epochsDone = epochs;
    resumeSteps = steps;
    resumeSums = sums == null ? null : sums.clone();
  }

  /**
   * The sums of the loss and of each metric (in the manifest's order) over the steps of the
   * current epoch trained so far, for a checkpoint taken inside an epoch
   * ({@link #resumeAfter(int, int, double[])}).
   *
   * @return a copy: the loss sum first, then the metrics' sums
   */
  public double[] epochSums() {
    return epochSums.clone();
  }

  /**
   * The number of epochs trained so far, over all {@code fit} calls.
   *
   * @return the count
   */
  public int epochsCompleted() {
    return epochsDone;
  }

  /**
   * The settings.
   *
   * @return the config
   */
  public Config config() {
    return config;
  }

  /** Closes the session and the graph; idempotent. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      if (session != null) {
        session.close();
      }
    } finally {
      if (graph != null) {
        graph.close();
      }
      session = null;
      graph = null;
    }
  }

  // ---------------------------------------------------------------------------------------------

  private void start(List<Callback> cbs) {
    if (session != null) {
      return;
    }
    GraphDef gd = current.graphDef();
    for (Callback cb : cbs) {
      GraphDef next = cb.beforeSession(gd, manifest);
      if (next == null) {
        throw new IllegalStateException(cb.getClass().getName()
            + ".beforeSession returned null (return the graph unchanged instead)");
      }
      gd = next;
    }
    if (gd != current.graphDef()) {
      checkNames(gd, "the graph rewritten by the callbacks");
      current = new TrainingGraph(gd, manifest);
      warnIfControlEdgesAtRisk(gd);
    }
    Graph g = new Graph();
    try {
      dev.lms4j.tf.NativeSwap.ensureLoadedFor(gd);
      g.importGraphDef(gd);
      Session s = opener.open(g, config.session());
      try {
        if (manifest.init() != null) {
          s.runner().addTarget(manifest.init()).run();
        }
      } catch (RuntimeException e) {
        s.close();
        throw e;
      }
      graph = g;
      session = s;
    } catch (RuntimeException e) {
      g.close();
      throw e;
    }
    LOG.debug("session started: {} nodes", gd.getNodeCount());
    for (Callback cb : cbs) {
      cb.onSessionStart(this);
    }
  }

  /** One step: feeds the batch, fetches loss and metrics, runs the train op when training. */
  private double[] run(Batch b, boolean train) {
    List<Tensor> feeds = new ArrayList<>(feedShapes.size());
    try {
      Session.Runner r = session.runner();
      for (int i = 0; i < feedShapes.size(); i++) {
        TFloat32 t = b.tensor(i, feedShapes.get(i));
        feeds.add(t);
        r.feed(manifest.feeds().get(i).name(), t);
      }
      fetches.forEach(r::fetch);
      if (train) {
        r.addTarget(manifest.trainOp());
      }
      try (Result res = r.run()) {
        double[] out = new double[fetches.size()];
        for (int i = 0; i < out.length; i++) {
          out[i] = scalar(res.get(i), fetches.get(i));
        }
        return out;
      }
    } finally {
      for (Tensor t : feeds) {
        t.close();
      }
    }
  }

  /** Logs from sums: values divided by {@code count}. */
  private Logs logs(double[] sums, long count, long samples, double seconds) {
    Map<String, Double> metrics = new LinkedHashMap<>();
    int i = 1;
    for (String name : manifest.metrics().keySet()) {
      metrics.put(name, sums[i++] / count);
    }
    return new Logs(sums[0] / count, metrics, samples, seconds > 0 ? samples / seconds : 0);
  }

  private static double scalar(Tensor t, String name) {
    if (t.shape().numDimensions() != 0) {
      throw new IllegalStateException("'" + name + "' must be a scalar, got shape " + t.shape());
    }
    if (t instanceof TFloat32 f) {
      return f.getFloat();
    }
    if (t instanceof TFloat64 d) {
      return d.getDouble();
    }
    if (t instanceof TInt32 n) {
      return n.getInt();
    }
    if (t instanceof TInt64 n) {
      return n.getLong();
    }
    throw new IllegalStateException("'" + name + "' must be a float or integer scalar, got "
        + t.dataType());
  }

  private void checkData(Dataset data, String what) {
    Objects.requireNonNull(data, what + " data");
    List<Shape> shapes = data.sampleShapes();
    if (shapes.size() != feedShapes.size()) {
      throw new IllegalArgumentException("the " + what + " data has " + shapes.size()
          + " components " + shapes + " but the graph has " + feedShapes.size() + " feeds "
          + feedNames() + ": component i feeds feed i");
    }
    for (int i = 0; i < shapes.size(); i++) {
      long perSample = feedShapes.get(i).size() / batch;
      if (shapes.get(i).size() != perSample) {
        throw new IllegalArgumentException("the " + what + " data's component " + i
            + " has samples of shape " + shapes.get(i) + " (" + shapes.get(i).size()
            + " elements) but feed '" + manifest.feeds().get(i).name() + "' has shape "
            + feedShapes.get(i) + " (" + perSample + " elements per sample)");
      }
    }
  }

  private List<String> feedNames() {
    return manifest.feeds().stream().map(Manifest.Feed::name).toList();
  }

  private void checkNames(GraphDef gd, String what) {
    Set<String> ops = new HashSet<>();
    for (NodeDef n : gd.getNodeList()) {
      ops.add(n.getName());
    }
    List<String> names = new ArrayList<>();
    manifest.feeds().forEach(f -> names.add(f.name()));
    names.add(manifest.loss());
    names.add(manifest.trainOp());
    if (manifest.init() != null) {
      names.add(manifest.init());
    }
    names.addAll(manifest.metrics().values());
    for (String name : names) {
      String op = name.contains(":") ? name.substring(0, name.lastIndexOf(':')) : name;
      if (!ops.contains(op)) {
        throw new IllegalArgumentException(what + " has no op '" + op + "', which the manifest "
            + "names");
      }
    }
  }

  private void warnIfControlEdgesAtRisk(GraphDef gd) {
    boolean lms = SwapRewriter.isRewritten(gd);
    boolean off = config.session().getGraphOptions().getRewriteOptions()
        .getDependencyOptimization() == RewriterConfig.Toggle.OFF;
    if (lms && !off) {
      LOG.warn("the graph holds LMS swap ops but the session config leaves grappler's "
          + "dependency optimizer on, which may drop their ordering edges; use "
          + "SessionConfigs.lms()");
    }
  }

  private static List<Callback> callbacks(Callback[] callbacks) {
    List<Callback> out = new ArrayList<>(callbacks.length);
    for (Callback cb : callbacks) {
      out.add(Objects.requireNonNull(cb, "callback"));
    }
    return out;
  }

  private long epochSeed(int epoch) {
    return config.seed() * 0x9E3779B97F4A7C15L + epoch;
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("the trainer is closed");
    }
  }
}
