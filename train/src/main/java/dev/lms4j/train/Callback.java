package dev.lms4j.train;

import dev.lms4j.tf.Manifest;
import org.tensorflow.proto.GraphDef;

/**
 * Hooks into a {@link Trainer}'s life; every hook defaults to doing nothing, so a callback
 * overrides only what it needs. Callbacks run in the order given to {@link Trainer#fit}, in the
 * trainer's thread.
 *
 * <pre>{@code
 * trainer.fit(train, 5, new Callback() {
 *   @Override
 *   public void onEpochEnd(int epoch, Logs logs) {
 *     log.info("epoch {}: {}", epoch, logs.summary());
 *   }
 * });
 * }</pre>
 *
 * <p>Order of calls in one {@code fit}: {@link #beforeSession} and {@link #onSessionStart} (only
 * when this call starts the session), {@link #onTrainBegin}; per epoch {@link #onEpochBegin},
 * per step {@link #onBatchBegin} and {@link #onBatchEnd}, then {@link #onEpochEnd}; finally
 * {@link #onTrainEnd}, or {@link #onTrainAborted} when a step or a callback threw.
 * {@link Trainer#evaluate} calls only the two session hooks (when it starts the session).
 *
 * <p>Extension point for checkpoints: a checkpoint callback restores variables in
 * {@link #onSessionStart} (after the initializer ran), keeps the trainer to reach
 * {@link Trainer#session()} and {@link Trainer#graph()}, and saves in {@link #onEpochEnd} or
 * every N {@link #onBatchEnd} calls.
 */
public interface Callback {

  /**
   * Rewrites the graph before the session starts (e.g. LMS swapping). Called once per trainer,
   * by the {@code fit} or {@code evaluate} call that starts the session; callbacks chain, each
   * getting the previous one's result.
   *
   * @param graphDef the graph so far
   * @param manifest its manifest (feeds with their static shapes, loss, train op, metrics); the
   *                 names it gives must still exist in the returned graph
   * @return the graph to run: {@code graphDef} itself when nothing changes
   */
  default GraphDef beforeSession(GraphDef graphDef, Manifest manifest) {
    return graphDef;
  }

  /**
   * The session has started and the manifest's initializer has run.
   *
   * @param trainer the trainer, whose {@link Trainer#session()} and {@link Trainer#graph()} are
   *                now live
   */
  default void onSessionStart(Trainer trainer) {}

  /**
   * A {@code fit} call starts.
   *
   * @param info its epochs, steps per epoch and batch size
   */
  default void onTrainBegin(FitInfo info) {}

  /**
   * An epoch starts.
   *
   * @param epoch the epoch number (1-based, see {@link FitInfo})
   */
  default void onEpochBegin(int epoch) {}

  /**
   * A step starts.
   *
   * @param batch the step within the epoch (1-based)
   */
  default void onBatchBegin(int batch) {}

  /**
   * A step has run.
   *
   * @param batch the step within the epoch (1-based)
   * @param logs  the step's loss and metrics (over its batch) and throughput
   */
  default void onBatchEnd(int batch, Logs logs) {}

  /**
   * An epoch has ended.
   *
   * @param epoch the epoch number
   * @param logs  the means over the epoch's steps, and the epoch's throughput
   */
  default void onEpochEnd(int epoch, Logs logs) {}

  /**
   * A {@code fit} call has ended normally.
   *
   * @param logs the last epoch's logs
   */
  default void onTrainEnd(Logs logs) {}

  /**
   * A {@code fit} call is ending by an exception (from a step or a callback), which the call
   * throws once every callback has seen it: release what {@link #onTrainBegin} took here.
   *
   * @param cause the exception
   */
  default void onTrainAborted(Throwable cause) {}
}
