package dev.lms4j.train;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.Probe;
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
 * <p><b>The probe.</b> With a budget, the callback does not trust the plan's prediction alone:
 * in {@link #beforeSession} it runs the plan's first step (the init op and one traced step, on
 * synthetic feeds of the manifest's shapes) as a probe in a worker JVM whose TensorFlow
 * allocator is limited to the budget ({@link Probe}). When the probe runs out of memory, the
 * graph is planned again with what was measured (up to three plans, each logged at INFO with its
 * predicted and measured peaks); when the planner refuses the budget, or no plan passes, the
 * unmodified graph is probed and trained where it fits ("LMS is not necessary"). A budget nothing
 * passes at makes {@code fit} throw {@link dev.lms4j.core.plan.PlanningException} naming the
 * smallest budget that could work, measured. The probe costs a JVM start and one step; it does
 * not touch the trainer's session, so the losses are those of a run without it. Turn it off with
 * {@link #withProbe(boolean) withProbe(false)}. It is skipped without a budget, and for graphs
 * with collective ops (a data-parallel worker's graph cannot run alone). A probe that fails for
 * another reason than memory (e.g. no worker JVM can start from this class path) is logged as a
 * warning and the plan trains unprobed. What it found is in {@link #probe()}.
 *
 * <pre>{@code
 * LmsCallback lms = LmsCallback.of(88L << 20);                    // probe on
 * LmsCallback trusting = LmsCallback.of(88L << 20).withProbe(false);
 * }</pre>
 *
 * <p>The session must keep the swap-ins' control edges: the trainer's default session config
 * ({@link dev.lms4j.tf.SessionConfigs#lms()}) does. The budget is what the planner aims at; a
 * hard limit on TensorFlow's allocator is set with {@code TF_CPU_ALLOCATOR_USE_BFC=true} and
 * {@code TF_CPU_BFC_MEM_LIMIT_IN_MB} before the JVM starts (the probe sets its own worker's).
 */
public final class LmsCallback implements Callback {

  private static final Logger LOG = LoggerFactory.getLogger(LmsCallback.class);

  private final Lms lms;
  private final long budgetBytes;
  private final SwapParams params;
  private final LmsMode mode;
  private LmsResult result;
  private boolean probing = true;
  private Probe.Outcome probe;

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
   * Turns the probe on (the default) or off.
   *
   * @param on false to train the first plan without probing it
   * @return this callback
   */
  public LmsCallback withProbe(boolean on) {
    this.probing = on;
    return this;
  }

  /**
   * What the probe found: its tries (predicted and measured peaks), re-plans and verdict.
   *
   * @return the outcome, or empty when no probe ran (turned off, no budget, collective ops, or
   *         no session started yet)
   */
  public Optional<Probe.Outcome> probe() {
    return Optional.ofNullable(probe);
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
    Lms lms = instance(manifest);
    TrainingGraph tg = new TrainingGraph(graphDef, manifest);
    long budget = lms.budget().bytes();
    if (probing && budget > 0 && lms.mode() != LmsMode.OFF && Probe.canRunAlone(graphDef)) {
      probe = Probe.closeLoop(tg, lms,
          Probe.Options.of(budget, lms));
      LOG.info("LMS probe: {} ({} tries, {} re-plans): {}", probe.verdict(),
          probe.attempts().size(), probe.replans(), probe.message());
      if (probe.verdict() == Probe.Verdict.REFUSED) {
        throw new PlanningException(probe.message(), probe.smallestBudgetBytes());
      }
      if (probe.verdict() == Probe.Verdict.FAILED) {
        LOG.warn("LMS probe could not decide ({}); training the plan unprobed", probe.message());
      }
      result = probe.result();
    } else {
      if (probing && budget > 0 && !Probe.canRunAlone(graphDef)) {
        LOG.info("LMS: no probe (the graph has collective ops, which cannot run alone)");
      }
      result = lms.rewrite(tg);
    }
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
