package dev.lms4j.train;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.TrainingGraph;
import java.util.Objects;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.GraphDef;

/**
 * Applies Large Model Support ({@link Lms}) to the graph before the trainer's session starts:
 * by default the {@code auto} mode against a memory budget (as the command line does), or the
 * TFLMS swap planner when its parameters are given, or any {@link LmsMode}.
 *
 * <pre>{@code
 * LmsCallback lms = LmsCallback.of(256L << 20);
 * trainer.fit(train, 5, lms);
 * lms.result().ifPresent(r -> log.info("{} swap-outs", r.plan().swapOuts().size()));
 * }</pre>
 *
 * The feed shapes, and so the batch size, come from the manifest; the ops the planner models are
 * the ancestors of what a training step runs (the loss, the metrics and the train op). When the
 * graph fits the budget without LMS, the graph is left as it is ({@link LmsResult#rewritten()} is
 * false). A budget no plan can meet makes {@code fit} throw
 * {@link dev.lms4j.core.plan.PlanningException}, naming the smallest budget that could work.
 *
 * <p>The session must keep the swap-ins' control edges: the trainer's default session config
 * ({@link dev.lms4j.tf.SessionConfigs#lms()}) does. The budget is what the planner aims at; a
 * hard limit on TensorFlow's allocator is set with {@code TF_CPU_ALLOCATOR_USE_BFC=true} and
 * {@code TF_CPU_BFC_MEM_LIMIT_IN_MB} before the JVM starts.
 */
public final class LmsCallback implements Callback {

  private static final Logger LOG = LoggerFactory.getLogger(LmsCallback.class);

  private final Lms lms;
  private final long budgetBytes;
  private final SwapParams params;
  private final LmsMode mode;
  private LmsResult result;

  /**
   * Applies the given, fully configured instance.
   *
   * @param lms the LMS configuration
   */
  public LmsCallback(Lms lms) {
    this.lms = Objects.requireNonNull(lms, "lms");
    this.budgetBytes = 0;
    this.params = null;
    this.mode = null;
  }

  private LmsCallback(long budgetBytes, SwapParams params, LmsMode mode) {
    if (budgetBytes <= 0) {
      throw new IllegalArgumentException("the LMS budget must be positive, got " + budgetBytes);
    }
    this.lms = null;
    this.budgetBytes = budgetBytes;
    this.params = Objects.requireNonNull(params, "params");
    this.mode = Objects.requireNonNull(mode, "mode");
  }

  /**
   * LMS in the {@code auto} mode against a budget (the command line's default).
   *
   * @param budgetBytes the device memory budget in bytes
   * @return the callback
   * @throws IllegalArgumentException when the budget is not positive
   */
  public static LmsCallback of(long budgetBytes) {
    return new LmsCallback(budgetBytes, SwapParams.defaults(), LmsMode.AUTO);
  }

  /**
   * LMS in the given mode against a budget.
   *
   * @param budgetBytes the device memory budget in bytes
   * @param mode        the mode, e.g. {@link LmsMode#TFLMS} or {@link LmsMode#REMAT}
   * @return the callback
   * @throws IllegalArgumentException when the budget is not positive
   */
  public static LmsCallback of(long budgetBytes, LmsMode mode) {
    return new LmsCallback(budgetBytes, SwapParams.defaults(), mode);
  }

  /**
   * LMS with the given parameters and budget: TFLMS when the three main parameters are set, else
   * {@code auto} (whose planners honour the parameters' include/exclude filters and tier); a
   * batch size left at -1 in {@code params} is set to the manifest's.
   *
   * @param budgetBytes the device memory budget in bytes
   * @param params      TFLMS parameters (-1 for the three main ones: auto-tune)
   * @return the callback
   * @throws IllegalArgumentException when the budget is not positive
   */
  public static LmsCallback of(long budgetBytes, SwapParams params) {
    return new LmsCallback(budgetBytes, params, LmsMode.AUTO);
  }

  /**
   * What LMS did, once the session has started.
   *
   * @return the result, or empty when no session was started with this callback yet
   */
  public Optional<LmsResult> result() {
    return Optional.ofNullable(result);
  }

  /**
   * What LMS did.
   *
   * @return the result
   * @throws IllegalStateException when no session was started with this callback yet
   */
  public LmsResult resultOrThrow() {
    if (result == null) {
      throw new IllegalStateException("LMS has not run: pass this callback to the first fit or "
          + "evaluate call of a trainer (the one that starts the session)");
    }
    return result;
  }

  /**
   * Rewrites the graph with the mode's plan (swaps, recomputation or both).
   *
   * @param graphDef the graph
   * @param manifest its manifest
   * @return the rewritten graph, or {@code graphDef} when LMS is not needed
   */
  @Override
  public GraphDef beforeSession(GraphDef graphDef, Manifest manifest) {
    result = instance(manifest).rewrite(new TrainingGraph(graphDef, manifest));
    if (result.rewritten()) {
      LOG.info("LMS ({}): {} ops recomputed, {} swap-outs, {} swap-ins; predicted peak {} MiB "
          + "-> {} MiB", result.memoryPlan().planner(), result.recompute().clonedOps(),
          result.plan().swapOuts().size(), result.plan().swapInCount(),
          result.predictedPeakBefore() >> 20, result.predictedPeakAfter() >> 20);
    } else {
      LOG.info("LMS: graph left unchanged (predicted peak {} MiB)",
          result.predictedPeakBefore() >> 20);
    }
    return result.graphDef();
  }

  /** Warns when the session was started before this callback could rewrite the graph. */
  @Override
  public void onTrainBegin(FitInfo info) {
    if (result == null) {
      LOG.warn("LmsCallback was given to a fit call after the trainer's session had started: "
          + "the graph was not rewritten");
    }
  }

  private Lms instance(Manifest manifest) {
    if (lms != null) {
      return lms;
    }
    SwapParams p = params;
    if (p.batchSize() == -1 && manifest.batchSize() <= Integer.MAX_VALUE) {
      p = p.toBuilder().batchSize((int) manifest.batchSize()).build();
    }
    return Lms.builder().budget(budgetBytes).params(p).mode(mode).build();
  }
}
