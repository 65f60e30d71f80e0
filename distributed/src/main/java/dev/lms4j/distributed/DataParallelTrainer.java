package dev.lms4j.distributed;

import dev.lms4j.tf.SerialOrder;
import dev.lms4j.tf.SwapRewriter;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.Callback;
import dev.lms4j.train.CheckpointCallback;
import dev.lms4j.train.Logs;
import dev.lms4j.train.Trainer;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.tf.Manifest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Result;
import org.tensorflow.Server;
import org.tensorflow.TargetSessions;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.RunOptions;

/**
 * One worker of a data-parallel job on TensorFlow's own distributed runtime: it starts this
 * task's in-process gRPC server ({@link org.tensorflow.Server}), rewrites the training graph with
 * {@link AllReduceRewriter} (gradients averaged over the workers by {@code CollectiveReduceV2}
 * before the optimizer's updates), and trains it with a {@link Trainer} whose session runs on the
 * server's target. Every worker of the job runs the same code with its own {@link Cluster#task()}
 * (one process per task: TensorFlow's memory budget is per process, so LMS plans per worker).
 *
 * <pre>{@code
 * Cluster cluster = Cluster.parse("127.0.0.1:2222,127.0.0.1:2223", task);
 * try (DataParallelTrainer t = new DataParallelTrainer(tg, cluster)) {   // tg: per-worker batch
 *   t.fit(train, 3, LmsCallback.of(256L << 20), checkpoints, new ProgressCallback());
 *   Logs test = t.evaluate(test);
 * }
 * }</pre>
 *
 * <p>Data: {@link #fit} takes the whole data set on every worker and feeds this worker its
 * {@link ShardedDataset} share (global batch = workers x per-worker batch; the order fixed by the
 * seed). Checkpoints: the chief (task 0) writes them; on the other workers a
 * {@link CheckpointCallback} only restores (so all workers resume from the chief's checkpoint).
 * Failures: each step takes at most {@link Options#stepTimeout()}, its collectives included; a
 * dead peer makes the step fail with a TensorFlow exception (the lost connection, or the step
 * timeout cancelling the collectives) instead of hanging. A start-up barrier (waiting at most
 * {@link Options#startTimeout()}) lets workers that start at different times meet before the
 * first step.
 *
 * <p>The trainer must be closed. TensorFlow cannot shut a started gRPC server down cleanly
 * ({@code TF_ServerStop} is unimplemented for it), so the server lives until the process exits;
 * run one worker per process.
 */
public final class DataParallelTrainer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DataParallelTrainer.class);

  /**
   * Timeouts and the trainer's settings.
   *
   * @param stepTimeout  how long one step may take, its collectives included
   *                     ({@code operation_timeout_in_ms})
   * @param startTimeout how long the start-up barrier waits for the slowest worker
   * @param config       the trainer's config; its session config gets the collective group
   *                     leader and the step timeout added
   */
  public record Options(Duration stepTimeout, Duration startTimeout, Trainer.Config config) {
    /**
     * Checks the values.
     *
     * @param stepTimeout  positive
     * @param startTimeout positive
     * @param config       not null
     */
    public Options {
      for (Duration d : new Duration[] {stepTimeout, startTimeout}) {
        if (d == null || d.isNegative() || d.isZero()) {
          throw new IllegalArgumentException("timeouts must be positive, got " + d);
        }
      }
      Objects.requireNonNull(config, "config");
    }

    /**
     * Steps 60 s, start-up 300 s, {@link Trainer.Config#defaults()}.
     *
     * @return the defaults
     */
    public static Options defaults() {
      return new Options(Duration.ofSeconds(60), Duration.ofSeconds(300),
          Trainer.Config.defaults());
    }

    /**
     * These options with another trainer config.
     *
     * @param c the config
     * @return new options
     */
    public Options withConfig(Trainer.Config c) {
      return new Options(stepTimeout, startTimeout, c);
    }

    /**
     * These options with another step timeout.
     *
     * @param step how long a step may take, its collectives included
     * @return new options
     */
    public Options withStepTimeout(Duration step) {
      return new Options(step, startTimeout, config);
    }

    /**
     * These options with another start-up timeout.
     *
     * @param start how long the start-up barrier waits for the slowest worker
     * @return new options
     */
    public Options withStartTimeout(Duration start) {
      return new Options(stepTimeout, start, config);
    }
  }

  private final Cluster cluster;
  private final Options options;
  private final TrainingGraph graph;
  private final Server server;
  private final Trainer trainer;
  private final int batch;
  private boolean closed;

  /**
   * A worker with {@link Options#defaults()}.
   *
   * @param perWorker the training graph at the per-worker batch size
   * @param cluster   the cluster and this task
   */
  public DataParallelTrainer(TrainingGraph perWorker, Cluster cluster) {
    this(perWorker, cluster, Options.defaults());
  }

  /**
   * A worker: rewrites the graph and starts this task's server (the session starts at the first
   * {@code fit} or {@code evaluate}).
   *
   * @param perWorker the training graph at the per-worker batch size
   * @param cluster   the cluster and this task
   * @param options   timeouts and trainer settings
   * @throws IllegalArgumentException when the graph cannot be made data-parallel (see
   *                                  {@link AllReduceRewriter})
   */
  public DataParallelTrainer(TrainingGraph perWorker, Cluster cluster, Options options) {
    this.cluster = Objects.requireNonNull(cluster, "cluster");
    this.options = Objects.requireNonNull(options, "options");
    this.graph = AllReduceRewriter.rewrite(perWorker, cluster,
        options.startTimeout().toMillis() / 1000f);
    this.batch = (int) perWorker.manifest().batchSize();
    ConfigProto session = cluster.sessionConfig(options.config().session(),
        options.stepTimeout().toMillis());
    Trainer.Config config = options.config().withSession(session);
    this.server = new Server(cluster.serverDef(session));
    server.start();
    LOG.info("task {} of {}: server on {} started", cluster.task(), cluster.size(),
        cluster.workers().get(cluster.task()));
    this.trainer = new Trainer(graph, config,
        (g, c) -> TargetSessions.open(g, cluster.target(), c));
  }

  /**
   * Trains {@code epochs} epochs on this worker's share of {@code train}.
   *
   * @param train     the whole training set (the same on every worker)
   * @param epochs    the number of epochs
   * @param callbacks hooks, in order; on workers other than the chief a
   *                  {@link CheckpointCallback} only restores
   * @return each epoch's logs (the loss and metrics are the job's: averaged over the workers)
   */
  public List<Logs> fit(Dataset train, int epochs, Callback... callbacks) {
    checkOpen();
    ShardedDataset mine = new ShardedDataset(train, cluster.size(), cluster.task(), batch);
    if (mine.size() == 0) {
      throw new IllegalArgumentException("the training data has " + train.size()
          + " samples, fewer than one global batch of " + mine.globalBatch());
    }
    return trainer.fit(mine, epochs, callbacks(callbacks));
  }

  /**
   * Evaluates on the whole of {@code test} on every worker (each worker computes the same means;
   * the averaged loss equals them); all workers must call it together.
   *
   * @param test      the test set
   * @param callbacks session hooks, as {@link Trainer#evaluate}
   * @return the means over all samples
   */
  public Logs evaluate(Dataset test, Callback... callbacks) {
    checkOpen();
    return trainer.evaluate(test, callbacks(callbacks));
  }

  /**
   * The trainer (its session runs on this task's server).
   *
   * @return the trainer
   */
  public Trainer trainer() {
    return trainer;
  }

  /**
   * The cluster and this task.
   *
   * @return the cluster
   */
  public Cluster cluster() {
    return cluster;
  }

  /**
   * The data-parallel graph this worker runs (before the callbacks' rewrites).
   *
   * @return the rewritten training graph
   */
  public TrainingGraph dataParallelGraph() {
    return graph;
  }

  /**
   * The timeouts and settings.
   *
   * @return the options
   */
  public Options options() {
    return options;
  }

  /** Closes the trainer and asks the server to stop; idempotent. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      trainer.close();
    } finally {
      try {
        server.stop();
      } catch (RuntimeException e) {
        LOG.debug("server stop: {}", e.toString());
      }
    }
  }

  private Callback[] callbacks(Callback[] given) {
    List<Callback> out = new ArrayList<>();
    for (Callback cb : given) {
      Objects.requireNonNull(cb, "callback");
      out.add(cluster.isChief() || !(cb instanceof CheckpointCallback) ? cb : new RestoreOnly(cb));
    }
    out.add(new SerialSteps());
    out.add(new Barrier());
    return out.toArray(Callback[]::new);
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("the data-parallel trainer is closed");
    }
  }

  /**
   * After an LMS callback has rewritten the graph: chains the step's ops in the order its plan was
   * simulated in ({@link SerialOrder}). A gRPC worker finishes each all-reduce on another thread,
   * which runs ops concurrently with the worker's own and breaks the plan's order (a budgeted
   * worker ran out of memory in 2 of 3 runs without the chain). A graph LMS left unchanged is not
   * chained: its all-reduces keep overlapping the backward pass.
   */
  private static final class SerialSteps implements Callback {
    @Override
    public GraphDef beforeSession(GraphDef graphDef, Manifest manifest) {
      if (!SwapRewriter.isRewritten(graphDef)) {
        return graphDef;
      }
      return SerialOrder.enforce(graphDef, manifest).graphDef();
    }
  }

  /** Runs the start-up barrier once the session has started (after the restores). */
  private final class Barrier implements Callback {
    @Override
    public void onSessionStart(Trainer t) {
      long t0 = System.nanoTime();
      RunOptions ro = RunOptions.newBuilder()
          .setTimeoutInMs(options.startTimeout().toMillis()).build();
      try (Result r = t.session().runner().fetch(AllReduceRewriter.BARRIER).setOptions(ro)
          .run()) {
        LOG.info("task {}: all {} workers met after {} ms", cluster.task(), cluster.size(),
            (System.nanoTime() - t0) / 1_000_000);
      }
    }
  }

  /** A checkpoint callback on a non-chief worker: restores at session start, never saves. */
  private static final class RestoreOnly implements Callback {
    private final Callback inner;

    RestoreOnly(Callback inner) {
      this.inner = inner;
    }

    @Override
    public GraphDef beforeSession(GraphDef graphDef, Manifest manifest) {
      return inner.beforeSession(graphDef, manifest);
    }

    @Override
    public void onSessionStart(Trainer t) {
      inner.onSessionStart(t);
    }
  }
}
