package dev.lms4j.tf.run;

import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.PlanningContext;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TensorPolicy;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.GraphStats;
import dev.lms4j.tf.InitOrder;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsBuilder;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.SerialOrder;
import dev.lms4j.tf.TrainingGraph;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.RewriterConfig;

/**
 * Closes the loop between a plan and the real allocator: before training goes on, the accepted
 * plan's first steps (the init op and two steps, the second traced) run as a probe in a worker
 * JVM whose TensorFlow allocator is limited to the budget ({@link BudgetedRunner}). When the
 * probe runs out of memory (or its traced peak leaves less than {@link #HEADROOM} of the budget
 * free and, for a graph in a fixed order, it does not also train under a limit that much tighter:
 * {@link Attempt#passed}), the graph is planned again at a lower
 * planning limit, lowered by what was measured (the size of the allocation that failed, parsed
 * from the allocator's message, or the measured overshoot), at most {@link Options#tries()}
 * times, each try logged at INFO with its predicted and measured peaks. When the planner refuses
 * the budget, or no plan passes, the unmodified graph is probed before giving up: where it trains
 * at the budget, it trains ("LMS is not necessary"), so lms4j never refuses a budget at which
 * plain TensorFlow trains.
 *
 * <pre>{@code
 * Lms lms = Lms.builder().budget(88L << 20).build();
 * Probe.Outcome o = Probe.closeLoop(tg, b -> lms.withBudget(b).rewrite(tg),
 *     Probe.Options.of(88L << 20, lms.budget().memRatio()));
 * if (o.verdict() == Probe.Verdict.REFUSED) { ... o.message() names the smallest budget ... }
 * GraphDef toTrain = o.graphDef();
 * }</pre>
 *
 * <p>The probe runs in a process of its own rather than in a throwaway session of the training
 * process: an OOM inside a oneDNN convolution can crash the JVM instead of throwing, a failed
 * allocation first waits about 10 s for memory (the supervising {@link WorkerProcess} stops the
 * worker as soon as the allocator reports it), and the BFC pool of the training process keeps no
 * trace of the probe. The training's math is untouched: the probe's session, variables and
 * feeds live and die in the probe's process.
 */
public final class Probe {
  private static final Logger LOG = LoggerFactory.getLogger(Probe.class);
  private static final Pattern ROUNDED = Pattern.compile("rounded to (\\d+)");
  private static final Pattern ALLOCATE = Pattern.compile(
      "allocate ([0-9.]+)\\s*(B|KiB|MiB|GiB)");
  private static final Pattern FAILED_OP = Pattern.compile("requested by op ([^\\s;,]+)");
  private static final Pattern SHAPE = Pattern.compile(
      "shape\\[([0-9,]*)\\] and type (\\w+)");
  /** The share of the budget a passing probe's traced peak must leave free: 2%. */
  public static final double HEADROOM = 0.02;
  /**
   * The memory ratio a probe plans at first where none was set: 0.95
   * ({@link LmsBuilder#ORDERED_MEM_RATIO}), where a plan nothing checks keeps 0.8
   * ({@link Budget#DEFAULT_MEM_RATIO}). The ratio is margin for what the memory model misses;
   * the probe measures that miss under the budget and re-plans, so the margin need not be kept
   * twice. Measured (AMD EPYC, `bench --suite acceptance`, zoo lenet, resnet and gpt2 and the
   * eleven corpus families at 60 and 85% of what the allocator model says each needs): 22 of 28
   * budgets trained with the probe at either first ratio, none ran out of memory after the probe
   * accepted a plan at either, and zoo resnet b32 at 122 MiB trained with 0.95 where 0.8 was
   * refused; the zoo LeNet at 88 MiB (the model puts its memory 11% low) trains at 0.95 (traced
   * 87.2 MiB, and under a limit 2% tighter too).
   */
  public static final double PROBED_MEM_RATIO = LmsBuilder.ORDERED_MEM_RATIO;
  /**
   * The memory ratio of the last plan tried where the planner refuses the budget at the smaller
   * margin too: 1.0, the whole budget. The probe is the margin there: the plan passes only where
   * it trained under the budget leaving {@link #HEADROOM} free, and is re-planned lower where it
   * ran out of memory. The model mostly over-predicts: the corpus encoder's plans at their
   * smallest budgets were predicted at 54.2-55.7 MiB and traced 49.2-50.8
   * ({@code docs/bench/corpus-chain-default.md}, {@code corpus-edge-margin.md}).
   */
  static final double NO_MARGIN = 1.0;
  /** The planning limit is lowered by at least this share of the budget on each re-plan. */
  private static final double MIN_STEP = 0.02;
  /**
   * Halvings of the re-plan step where a lowered limit leaves no plan, at most: each costs a
   * plan, not a probe. Four, not two: the corpus densenet at 25 MiB ran out of memory allocating
   * 8 MiB, and only the fourth halving (21.9 MiB) was above the planner's lowest peak (21 MiB).
   */
  private static final int BACK_OFFS = 4;
  /**
   * Steps a probe runs after init, the last one traced: the second step can need more than the
   * first (measured: the corpus encoder with the framework's Adam at 138 MiB passed init and one
   * step, then ran out of memory in the second step's SoftmaxCrossEntropyWithLogits).
   */
  private static final int STEPS = 2;
  /** Probes that check (and raise) a refusal's smallest budget, at most. */
  private static final int CHECKS = 3;
  /**
   * Runs that bisect a checked refusal figure down, at most, for a plan in a fixed order (the
   * corpus densenet at 24 MiB: 23.0 MiB traced + the 8 MiB that failed named 31, a plan for 26
   * trains).
   */
  private static final int BISECTIONS = 4;

  private Probe() {}

  /** Plans the graph for a budget (its planning limit is bytes x memory ratio). */
  @FunctionalInterface
  public interface Planner {
    /**
     * Plans and rewrites.
     *
     * @param budget the budget and the share of it the simulated peak may use
     * @return the plan and rewritten graph
     * @throws PlanningException when no plan fits that limit
     */
    LmsResult plan(Budget budget);
  }

  /**
   * How to probe.
   *
   * @param budgetBytes the budget the worker's allocator is limited to (whole MiB are used)
   * @param memRatio    the memory ratio of the first plan
   * @param tries       probes of plans at most (each re-plan is one more)
   * @param seed        seed of the synthetic feeds
   * @param timeout     how long one probe may take
   * @param serialOrder where no plan passes, probe the unmodified graph in a fixed order first
   */
  public record Options(long budgetBytes, double memRatio, int tries, long seed,
      Duration timeout, boolean serialOrder) {
    public Options {
      if (budgetBytes <= 0) {
        throw new IllegalArgumentException("a probe needs a budget");
      }
      if (tries < 1) {
        throw new IllegalArgumentException("a probe needs at least one try");
      }
      Objects.requireNonNull(timeout, "timeout");
    }

    /** Three tries, seed 42, 15 minutes per probe. */
    public static Options of(long budgetBytes, double memRatio) {
      return new Options(budgetBytes, memRatio, 3, 42, Duration.ofMinutes(15), false);
    }

    /**
     * As {@link #of(long, double)} for probing {@code lms}'s plans: at the memory ratio set on
     * it, else at {@link #PROBED_MEM_RATIO} (how {@code run}, {@code train} and the LMS callback
     * probe).
     */
    public static Options of(long budgetBytes, Lms lms) {
      return of(budgetBytes, lms.memRatioSet() ? lms.budget().memRatio() : PROBED_MEM_RATIO);
    }

    /**
     * The same options; with {@code on}, where no plan passes, the unmodified graph is probed in
     * a fixed order ({@link SerialOrder}) before it is probed as given (as {@code Lms} with
     * {@code serialOrder(true)} rewrites).
     */
    public Options withSerialOrder(boolean on) {
      return new Options(budgetBytes, memRatio, tries, seed, timeout, on);
    }
  }

  /** What the probing decided. */
  public enum Verdict {
    /** The first plan passed its probe. */
    ACCEPTED,
    /** A later plan, planned with what an earlier probe measured, passed. */
    REPLANNED,
    /** No plan (or the planner's refusal), but the unmodified graph trains at the budget. */
    UNMODIFIED,
    /** Nothing passed: the budget is refused, naming the smallest one that could work. */
    REFUSED,
    /**
     * A probe failed for another reason than memory (the message says which); the plan it
     * probed is in the outcome, unverified (e.g. a worker JVM could not start here).
     */
    FAILED
  }

  /**
   * One probe.
   *
   * @param number              1-based
   * @param graph               {@code plan} or {@code unmodified}
   * @param planner             the plan's planner ({@code none} for the unmodified graph)
   * @param memRatio            the memory ratio the plan was made at (NaN: unmodified)
   * @param predictedPeakBytes  the plan's simulated peak
   * @param fits                init and the step ran under the budget
   * @param oom                 the probe ran out of memory
   * @param measuredPeakBytes   the traced step's highest {@code allocator_bytes_in_use} (-1
   *                            when it did not run)
   * @param failedAllocationBytes the size of the allocation that failed (-1 when unknown)
   * @param error               what went wrong, or null
   * @param tighterLimitBytes   where the steps ran but the traced peak left less than
   *                            {@link #HEADROOM} free, the tighter limit the same graph was run
   *                            at once more ({@link #tighterLimit}); -1 when it was not
   * @param tighterFits         init and the steps also ran under {@code tighterLimitBytes}
   */
  public record Attempt(int number, String graph, String planner, double memRatio,
      long predictedPeakBytes, boolean fits, boolean oom, long measuredPeakBytes,
      long failedAllocationBytes, String error, long tighterLimitBytes, boolean tighterFits) {
    /**
     * True when the steps ran and either the traced peak left {@link #HEADROOM} of
     * {@code budgetBytes} free or the same graph also ran under a limit that much tighter: at
     * the very edge the same graph passes one run and fails the next (measured: the corpus
     * embedding-sparse's unmodified graph passed at 60 MiB with a traced 59.5 MiB, then ran out
     * of memory in init; its bisected minimum is 70 MiB). Under a tight limit the traced peak
     * overstates the need, though: BFC hands out a free chunk whole where it is less than twice
     * the request, so {@code allocator_bytes_in_use} climbs towards the limit (measured: the
     * corpus densenet's tflms plan traced 25.9 MiB under 26 MiB and 26.9 under 27, 23.0 without
     * a limit, and ran out of memory at 25). A run under the tighter limit measures the margin
     * itself, and is made only for graphs that run in a fixed order ({@link SerialOrder}),
     * whose allocations are the same in every run.
     */
    public boolean passed(long budgetBytes) {
      return fits && (measuredPeakBytes <= budgetBytes - (long) (HEADROOM * budgetBytes)
          || tighterFits);
    }

    /** This attempt with the result of its run under a tighter limit. */
    Attempt withTighter(long limitBytes, boolean trained) {
      return new Attempt(number, graph, planner, memRatio, predictedPeakBytes, fits, oom,
          measuredPeakBytes, failedAllocationBytes, error, limitBytes, trained);
    }

    /**
     * What was probed, for a log line: {@code "tflms-swap plan at memory ratio 0.800"},
     * {@code "unmodified graph"} or {@code "unmodified graph, its ops in a fixed order"}.
     */
    public String what() {
      return graph.equals("plan")
          ? planner + " plan at memory ratio " + String.format(Locale.ROOT, "%.3f", memRatio)
          : graph.equals("unmodified") ? "unmodified graph"
          : "unmodified graph, its ops in a fixed order";
    }
  }

  /**
   * The result of {@link #closeLoop}.
   *
   * @param verdict             what was decided
   * @param result              the plan to train with (for {@link Verdict#UNMODIFIED}, the
   *                            unmodified graph's model and prediction; for
   *                            {@link Verdict#FAILED}, the plan whose probe failed); null when
   *                            refused
   * @param attempts            every probe, in order
   * @param replans             plans made after the first because of a probe
   * @param smallestBudgetBytes for {@link Verdict#REFUSED}: the smallest budget that could work
   *                            (else -1)
   * @param message             one plain line: why it was refused, or what happened
   */
  public record Outcome(Verdict verdict, LmsResult result, List<Attempt> attempts, int replans,
      long smallestBudgetBytes, String message) {
    public Outcome {
      attempts = List.copyOf(attempts);
    }

    /** The graph to train: the accepted plan's, or null when refused. */
    public GraphDef graphDef() {
      return result == null ? null : result.graphDef();
    }

    /** True when training may go on. */
    public boolean trains() {
      return verdict == Verdict.ACCEPTED || verdict == Verdict.REPLANNED
          || verdict == Verdict.UNMODIFIED;
    }
  }

  /**
   * True when a graph can run alone in a probe worker: not a data-parallel worker's graph, whose
   * collective ops wait for peers that a probe does not have.
   */
  public static boolean canRunAlone(GraphDef gd) {
    return gd.getNodeList().stream().noneMatch(n -> n.getOp().startsWith("Collective")
        || n.getOp().startsWith("Nccl"));
  }

  /**
   * Plans {@code tg} with {@code planner} at {@code o.memRatio()}, probes the plan under the
   * budget, and re-plans with what the probe measured until one passes or the tries run out.
   *
   * @param tg      the unmodified training graph
   * @param planner plans for a budget (e.g. {@code b -> lms.withBudget(b).rewrite(tg)})
   * @param o       budget, first ratio, tries
   * @return the outcome; never throws for OOM, a refusal or a crashed probe
   * @throws UncheckedIOException when a worker cannot be started
   */
  public static Outcome closeLoop(TrainingGraph tg, Planner planner, Options o) {
    return closeLoop(tg, planner, List.of(), o);
  }

  /**
   * {@link #closeLoop(TrainingGraph, Planner, List, Options)} with {@code lms}'s plans, and the
   * plans of its {@link Lms#alternatives() alternative modes} when its first plan runs out of
   * memory: how {@code run}, {@code train} and the {@code Trainer}'s LMS callback probe.
   *
   * @param tg  the unmodified training graph
   * @param lms the configuration (its budget is replaced by each try's)
   * @param o   budget, first ratio, tries
   * @return the outcome; never throws for OOM, a refusal or a crashed probe
   */
  public static Outcome closeLoop(TrainingGraph tg, Lms lms, Options o) {
    List<Planner> others = new ArrayList<>();
    for (LmsMode m : lms.alternatives()) {
      Lms other = lms.withMode(m);
      others.add(b -> other.withBudget(b).rewrite(tg));
    }
    // the optimizer's slots on the host between updates, then the weights too between their
    // reads: the last levers of every mode
    for (Lms offloaded = lms.withNextOffload(tg); offloaded != null;
        offloaded = offloaded.withNextOffload(tg)) {
      Lms o2 = offloaded;
      others.add(b -> o2.withBudget(b).rewrite(tg));
    }
    return closeLoop(tg, b -> lms.withBudget(b).rewrite(tg), others,
        lms.serialOrder() ? o.withSerialOrder(true) : o);
  }

  /**
   * As {@link #closeLoop(TrainingGraph, Planner, Options)}; when the first plan does not pass,
   * the {@code alternatives}' plans for the same budget and ratio (other modes: the model's miss
   * is often one planner's, not the budget's) are probed first, the one predicted fastest first,
   * before the planning limit is lowered; where none of them differs from what was probed (at a
   * high ratio they may all leave the graph as it is), they are tried again after the next
   * re-plan, at its ratio. Each one probed counts as a re-plan.
   *
   * @param tg           the unmodified training graph
   * @param planner      plans for a budget
   * @param alternatives other planners tried at the first plan's budget when it fails
   * @param o            budget, first ratio, tries
   * @return the outcome; never throws for OOM, a refusal or a crashed probe
   */
  public static Outcome closeLoop(TrainingGraph tg, Planner planner, List<Planner> alternatives,
      Options o) {
    List<Attempt> attempts = new ArrayList<>();
    long budget = o.budgetBytes();
    double ratio = o.memRatio();
    LmsResult plan;
    try {
      plan = planner.plan(new Budget(budget, ratio));
    } catch (PlanningException refused) {
      // the memory ratio is margin for what the model misses; the probe measures that miss, so
      // where the planner refuses at the first ratio a plan at a smaller margin is probed too,
      // and where it refuses that, a plan with no margin at all (the tries below lower its
      // limit again if it runs out of memory; a plan passes only on what its probe measured)
      PlanningException why = refused;
      plan = null;
      for (double closer : closerRatios(ratio)) {
        try {
          plan = closerPlan(planner, budget, ratio, closer, why);
        } catch (PlanningException again) {
          // its smallest budget is the lower one, and the one a plan there is checked at
          why = again;
          ratio = closer;
          continue;
        }
        if (plan == null) {
          // the graph as given at that ratio: probed at the end, against the last refusal
          return refusedAtFirst(tg, planner, alternatives, o, attempts, why);
        }
        ratio = closer;
        break;
      }
      if (plan == null) {
        return refusedAtFirst(tg, planner, alternatives, o, attempts, why);
      }
    }
    return probeAndReplan(tg, planner, alternatives, o, attempts, plan, ratio);
  }

  /**
   * The planner's plan at {@code closer} where it refused {@code budget} at {@code ratio}, or
   * null where it leaves the graph as given there. Measured on the corpus U-Net (bench size, 33
   * MiB without LMS): at 14 MiB auto refuses at ratio 0.8 (its lowest simulated peak, 12.4 MiB,
   * is above 11.2) and its plan at 0.95 trains (traced 13.2 MiB).
   *
   * @throws PlanningException where the planner refuses the budget at that ratio too
   */
  private static LmsResult closerPlan(Planner planner, long budget, double ratio, double closer,
      PlanningException refused) {
    LmsResult r = planner.plan(new Budget(budget, closer));
    if (!r.rewritten() && r.scheduling() == null) {
      return null;
    }
    LOG.info("[LMS][probe] The planner refuses {} MiB at memory ratio {} ({}); its plan at {} "
        + "(predicted peak {}) is probed instead", Budget.mib(budget),
        String.format(Locale.ROOT, "%.2f", ratio), refused.getMessage(),
        String.format(Locale.ROOT, "%.2f", closer), mib(r.predictedPeakAfter()));
    return r;
  }

  /**
   * The memory ratios tried, in order, where the planner refuses a budget at {@code first}: the
   * smaller margin ({@link LmsBuilder#ORDERED_MEM_RATIO}) and then none ({@link #NO_MARGIN}),
   * each only where it is above {@code first}.
   */
  private static double[] closerRatios(double first) {
    return java.util.stream.DoubleStream.of(LmsBuilder.ORDERED_MEM_RATIO, NO_MARGIN)
        .filter(r -> r > first).toArray();
  }

  /** Where the planner refuses the budget: the unmodified graph is probed, or it is refused. */
  private static Outcome refusedAtFirst(TrainingGraph tg, Planner planner,
      List<Planner> alternatives, Options o, List<Attempt> attempts,
      PlanningException refused) {
    long budget = o.budgetBytes();
    long weights = unmodified(tg, null).stats().parameterBytes();
    if (budget < weights) {
      // the variables alone do not fit: no graph of these weights can train, nothing to probe
      return new Outcome(Verdict.REFUSED, null, attempts, 0, refused.smallestBudgetBytes(),
          refused.getMessage() + " (Not probed: the variables alone, " + mib(weights)
              + ", exceed the budget.)");
    }
    LOG.info("[LMS][probe] The planner refuses {} MiB ({}); probing the unmodified graph",
        Budget.mib(budget), refused.getMessage());
    return unmodifiedOrRefuse(tg, planner, alternatives, o, attempts, 0, refused, null);
  }

  /** Probes {@code plan} (planned at {@code ratio}) and re-plans with what each probe measured. */
  private static Outcome probeAndReplan(TrainingGraph tg, Planner planner,
      List<Planner> alternatives, Options o, List<Attempt> attempts, LmsResult first,
      double firstRatio) {
    long budget = o.budgetBytes();
    double ratio = firstRatio;
    LmsResult plan = first;
    int replans = 0;
    long largestFailed = -1;
    LmsResult last = plan;
    List<GraphDef> probed = new ArrayList<>();
    boolean alternativesProbed = false;
    boolean lastOom = false;
    // the op whose allocation failed in the last plan's probe (null: not known)
    String lastFailedOp = null;
    for (int t = 1; t <= o.tries(); t++) {
      last = plan;
      Attempt a = probe(tg, plan.graphDef(), attempts.size() + 1, "plan", plannerLabel(plan),
          ratio, plan.predictedPeakAfter(), o);
      attempts.add(a);
      if (a.passed(budget)) {
        return new Outcome(replans == 0 ? Verdict.ACCEPTED : Verdict.REPLANNED, plan, attempts,
            replans, -1, String.format(Locale.ROOT, "the plan (predicted peak %s) ran under %d "
                + "MiB with a traced peak of %s%s", mib(a.predictedPeakBytes()),
                Budget.mib(budget), mib(a.measuredPeakBytes()),
                replans == 0 ? "" : " after " + replans + " re-plan" + (replans > 1 ? "s" : "")));
      }
      if (!a.fits() && !a.oom()) {
        return new Outcome(Verdict.FAILED, plan, attempts, replans, -1,
            "the probe of the plan failed: " + a.error());
      }
      largestFailed = Math.max(largestFailed, a.failedAllocationBytes());
      lastOom = a.oom();
      lastFailedOp = a.oom() ? failedOp(a.error()) : null;
      probed.add(plan.graphDef());
      if (!alternativesProbed && !alternatives.isEmpty()) {
        // the other modes' plans at this plan's budget and ratio, once some of them differ
        // from what was probed (at a high ratio they may all be the graph as given; lower, they
        // differ: the zoo lenet at 88 MiB, ratio 0.95, got remat's plan only once re-planned)
        int before = attempts.size();
        LmsResult other = alternative(tg, plan.planner(), probed, alternatives,
            new Budget(budget, ratio), attempts, o);
        alternativesProbed = attempts.size() > before;
        replans += attempts.size() - before;
        if (other != null) {
          Attempt ok = attempts.get(attempts.size() - 1);
          return new Outcome(Verdict.REPLANNED, other, attempts, replans, -1, String.format(
              Locale.ROOT, "the %s plan (predicted peak %s) ran under %d MiB with a traced peak "
                  + "of %s, where %s %s", other.planner(),
              mib(ok.predictedPeakBytes()), Budget.mib(budget), mib(ok.measuredPeakBytes()),
              plan.planner() == null ? "the graph as given" : "the " + plan.planner()
                  + " plan", a.oom() ? "ran out of memory"
                  : "left less than " + Math.round(HEADROOM * 100) + "% of the budget free"));
        }
      }
      if (t == o.tries()) {
        break;
      }
      // what the plan missed: the failed allocation (scratch, fragmentation) or the overshoot
      long missed = a.oom() ? a.failedAllocationBytes() : a.measuredPeakBytes() - budget;
      long step = Math.max(missed, (long) (MIN_STEP * budget));
      long from = Math.min(plan.predictedPeakAfter(), (long) (budget * ratio));
      long limit = from - step;
      double next = (double) limit / budget;
      if (next <= 0) {
        LOG.info("[LMS][probe] No lower planning limit is left ({} missed)", mib(missed));
        break;
      }
      LOG.info("[LMS][probe] Re-planning at a limit of {} (memory ratio {}): {}", mib(limit),
          String.format(Locale.ROOT, "%.3f", next), a.oom() ? "the probe missed " + mib(missed)
              : "the probe left less than " + Math.round(HEADROOM * 100) + "% of the budget free");
      LmsResult replanned = null;
      // an out-of-memory error tells what failed, not by how much the plan missed: where the
      // lowered limit leaves no plan (refused, or only the graph as given, which the end probes
      // anyway), back off halfway towards the limit that failed, at most BACK_OFFS times
      for (int b = 0; b <= BACK_OFFS; b++) {
        try {
          LmsResult r = planner.plan(new Budget(budget, next));
          boolean asGiven = !r.rewritten() && r.scheduling() == null;
          if (r.graphDef().equals(plan.graphDef())) {
            LOG.info("[LMS][probe] At a limit of {} the plan is the one that failed", mib(limit));
          } else if (!asGiven || !plan.rewritten()) {
            replanned = r;
            break;
          } else {
            LOG.info("[LMS][probe] At a limit of {} no plan is left, only the graph as given",
                mib(limit));
          }
        } catch (PlanningException refused) {
          LOG.info("[LMS][probe] The planner refuses a limit of {}: {}", mib(limit),
              refused.getMessage());
        }
        limit = (limit + from) / 2;
        next = (double) limit / budget;
        if (b < BACK_OFFS) {
          LOG.info("[LMS][probe] Re-planning halfway back, at a limit of {} (memory ratio {})",
              mib(limit), String.format(Locale.ROOT, "%.3f", next));
        }
      }
      if (replanned == null) {
        break;
      }
      ratio = next;
      plan = replanned;
      replans++;
    }
    // the variables whose initializer made the request that failed (none where the step did)
    List<String> initLast = lastOom ? InitOrder.initializing(last.graphDef(),
        tg.manifest().init(), tg.manifest().runOps(), lastFailedOp) : List.of();
    if (lastOom) {
      int before = attempts.size();
      Outcome one = inOneRegion(tg, last, initLast, lastFailedOp, ratio, o, attempts,
          replans + 1);
      if (one != null) {
        return one;
      }
      replans += attempts.size() - before;
    }
    return unmodifiedOrRefuse(tg, planner, alternatives, o, attempts, replans, null,
        new Failed(last, largestFailed, initLast));
  }

  /**
   * The last plan that ran out of memory, probed once more with init growing one allocator
   * region of the whole budget first ({@link InitOrder#oneRegion}): TensorFlow's CPU allocator
   * grows regions by doubling and holds a large tensor in a region under twice its size whole,
   * so a plan whose live tensors fit can still find no chunk; in one region every tensor is cut
   * from one free chunk (measured: ResNet-50 at batch 280 under 201 MiB, and the unmodified mlp
   * 2 x 768, batch 8192, at 150 MiB where TensorFlow needs 160). Tried after the re-plans and
   * the other modes' plans, not before: on the corpus DenseNet at 29 MiB one region ran out of
   * memory where the graph's own order trained. Where the allocation that failed was made by a
   * variable's initializer ({@link InitOrder#initializing}), that variable is created last too:
   * its temporaries then have the region to themselves once the other variables exist (the
   * corpus init-heavy, see {@link InitOrder#oneRegion(GraphDef, String, java.util.Set, long,
   * List)}). Adds the probe to {@code attempts}.
   *
   * @param last     the variables whose initializer made the request that failed (empty where
   *                 the step made it, or it is not known)
   * @param failedOp the op whose allocation failed in the plan's probe (null: not known)
   * @param replans the re-plans counted with its first probe (each further probe counts one more)
   * @return the outcome with the plan in one region where it passed, else null (also where
   *     init cannot be given the primer, and nothing is probed)
   */
  private static Outcome inOneRegion(TrainingGraph tg, LmsResult plan, List<String> last,
      String failedOp, double ratio, Options o, List<Attempt> attempts, int replans) {
    long budget = o.budgetBytes();
    String init = tg.manifest().init();
    Set<String> runOps = tg.manifest().runOps();
    // the variable whose initializer failed created last, else (or where that fails too) one
    // region alone
    List<List<String>> tries = last.isEmpty() ? List.of(List.of()) : List.of(last, List.of());
    int made = 0;
    for (List<String> l : tries) {
      GraphDef one = InitOrder.oneRegion(plan.graphDef(), init, runOps, budget, l);
      if (one == null) {
        continue;
      }
      String created = l.isEmpty() ? "" : ", " + String.join(", ", l) + " created last";
      if (!l.isEmpty()) {
        LOG.info("[LMS][probe] {} ran out of memory in init ({}): probing it with init growing "
            + "one allocator region first and creating {} last",
            plan.rewritten() ? "The " + plan.planner() + " plan" : "The graph as given",
            failedOp, String.join(", ", l));
      }
      Attempt r = probe(tg, one, attempts.size() + 1, "plan",
          plannerLabel(plan) + " (one allocator region" + created + ")", ratio,
          plan.predictedPeakAfter(), o);
      attempts.add(r);
      made++;
      if (r.passed(budget)) {
        return new Outcome(Verdict.REPLANNED, plan.withGraphDef(one), attempts,
            replans + made - 1, -1,
            String.format(Locale.ROOT, "the %s (predicted peak %s) ran under %d MiB with a "
                + "traced peak of %s once init grew one allocator region of the whole budget (a "
                + "%s primer made first%s), where it ran out of memory in regions grown by "
                + "doubling", plan.rewritten() ? plan.planner() + " plan" : "graph as given",
                mib(r.predictedPeakBytes()), Budget.mib(budget), mib(r.measuredPeakBytes()),
                mib(InitOrder.oneRegionPrimer(budget)), created));
      }
    }
    return null;
  }

  /**
   * Plans with each alternative at {@code b} and probes the rewritten graphs not in
   * {@code probed} (the graph as given is left to the end's probe of the unmodified graph), the
   * one predicted fastest first; adds each probe to {@code attempts} and its graph to
   * {@code probed}.
   *
   * @return the first plan that passed, or null
   */
  private static LmsResult alternative(TrainingGraph tg, String failed, List<GraphDef> probed,
      List<Planner> alternatives, Budget b, List<Attempt> attempts, Options o) {
    List<LmsResult> plans = new ArrayList<>();
    for (Planner p : alternatives) {
      try {
        LmsResult r = p.plan(b);
        if ((r.rewritten() || r.scheduling() != null) && !probed.contains(r.graphDef())) {
          probed.add(r.graphDef());
          plans.add(r);
        }
      } catch (PlanningException e) {
        LOG.debug("[LMS][probe] An alternative planner refuses: {}", e.getMessage());
      }
    }
    plans.sort(java.util.Comparator.comparingDouble(
        r -> r.memoryPlan().estimate().stepMsAfter()));
    if (!plans.isEmpty()) {
      LOG.info("[LMS][probe] The {} plan did not pass its probe; probing the plans of {} at the "
          + "same budget first", failed == null ? "first" : failed,
          plans.stream().map(LmsResult::planner).toList());
    }
    for (LmsResult r : plans) {
      Attempt a = probe(tg, r.graphDef(), attempts.size() + 1, "plan", r.planner(),
          b.memRatio(), r.predictedPeakAfter(), o);
      attempts.add(a);
      if (a.passed(o.budgetBytes())) {
        return r;
      }
    }
    return null;
  }

  /**
   * The last plan that failed its probe, the largest allocation that failed, and the variables
   * whose initializer made the request that failed (empty where the step made it).
   */
  private record Failed(LmsResult plan, long largestFailedBytes, List<String> initLast) {
    /**
     * The plan's graph as it is run under {@code limitBytes} to find the smallest budget: with
     * {@link #initLast}, init in one allocator region of that limit and those variables created
     * last, as the probe's last try ran it ({@link InitOrder#oneRegion}); else as planned.
     */
    GraphDef at(TrainingGraph tg, long limitBytes) {
      if (initLast.isEmpty()) {
        return plan.graphDef();
      }
      GraphDef one = InitOrder.oneRegion(plan.graphDef(), tg.manifest().init(),
          tg.manifest().runOps(), limitBytes, initLast);
      return one != null ? one : plan.graphDef();
    }
  }

  /**
   * Probes the unmodified graph; trains it when it passes, else refuses with the smallest budget
   * that could work.
   */
  private static Outcome unmodifiedOrRefuse(TrainingGraph tg, Planner planner,
      List<Planner> alternatives, Options o, List<Attempt> attempts, int replans,
      PlanningException refused, Failed failed) {
    long budget = o.budgetBytes();
    boolean lastWasUnmodified = failed != null && !failed.plan().rewritten()
        && failed.plan().scheduling() == null;
    Attempt u = null;
    if (!lastWasUnmodified) {
      LmsResult r = unmodified(tg, failed != null ? failed.plan() : null);
      // with the serial order, first in a fixed order (the same memory in every run:
      // TensorFlow's own order varies between processes, so the graph as given can pass this
      // probe and run out of memory in training), then as given
      SerialOrder.Result chained = o.serialOrder()
          ? SerialOrder.enforce(tg.graphDef(), tg.manifest()) : null;
      if (chained != null && chained.addedEdges() > 0) {
        Attempt c = probe(tg, chained.graphDef(), attempts.size() + 1, "unmodified, chained",
            "none", Double.NaN, r.predictedPeakBefore(), o);
        attempts.add(c);
        if (c.passed(budget)) {
          return new Outcome(Verdict.UNMODIFIED, r.withGraphDef(chained.graphDef()), attempts,
              replans, -1, String.format(Locale.ROOT, "%s; the unmodified graph, its ops in a "
                  + "fixed order, trains under %d MiB (traced peak %s): LMS is not necessary",
                  refused != null ? "the planner refused the budget" : "no plan passed its probe",
                  Budget.mib(budget), mib(c.measuredPeakBytes())));
        }
      }
      u = probe(tg, tg.graphDef(), attempts.size() + 1, "unmodified", "none", Double.NaN,
          r.predictedPeakBefore(), o);
      attempts.add(u);
      if (u.passed(budget)) {
        return new Outcome(Verdict.UNMODIFIED, r, attempts, replans, -1, String.format(
            Locale.ROOT, "%s; the unmodified graph trains under %d MiB (traced peak %s): LMS "
                + "is not necessary", refused != null ? "the planner refused the budget"
                : "no plan passed its probe", Budget.mib(budget), mib(u.measuredPeakBytes())));
      }
    }
    Attempt edge = attempts.stream().filter(a -> a.fits() && a.tighterLimitBytes() > 0)
        .findFirst().orElse(null);
    if (edge != null) {
      // a graph in a fixed order ran under the budget, only without the headroom's margin: the
      // smallest budget whose tighter limit is this budget gives it that margin, measured
      long at = withMargin(budget);
      return new Outcome(Verdict.REFUSED, null, attempts, replans, at << 20, String.format(
          Locale.ROOT, "A budget of %d MiB cannot work: no plan passed its probe (try %d, the "
              + "%s, ran under it with less than %d%% of it free and did not train under %d "
              + "MiB); the smallest budget that could work is about %d MiB (measured: that run "
              + "under %d MiB is the %d%% margin of %d MiB).", Budget.mib(budget),
          edge.number(), edge.what(), Math.round(HEADROOM * 100),
          Budget.mib(edge.tighterLimitBytes()), at, Budget.mib(budget),
          Math.round(HEADROOM * 100), at));
    }
    // the smallest budget that could work, from measurements: a traced run without a limit of
    // the last plan (or of the unmodified graph) plus the largest allocation that failed (the
    // trace samples between ops, so a kernel's scratch does not show in it)
    GraphDef measure = failed != null ? failed.plan().graphDef() : tg.graphDef();
    long largest = failed != null ? failed.largestFailedBytes() : -1;
    if (u != null) {
      largest = Math.max(largest, u.failedAllocationBytes());
    }
    RunResult free = run(tg, measure,
        BudgetedRunner.Options.of(0, STEPS).withTimeout(o.timeout()));
    long smallest;
    String how;
    if (free.fits() && free.peakBytes() > 0) {
      smallest = free.peakBytes() + Math.max(0, largest);
      how = String.format(Locale.ROOT, "measured: the %s's traced peak without a limit, %s%s",
          failed != null ? "last plan" : "unmodified graph", mib(free.peakBytes()),
          largest > 0 ? " + the largest allocation that failed, " + mib(largest) : "");
    } else {
      smallest = refused != null ? refused.smallestBudgetBytes() : -1;
      how = "the planner's estimate (the run without a limit failed: " + free.error() + ")";
    }
    long needMib = Budget.mibUp(smallest);
    boolean checked = false;
    long estimate = refused != null ? Budget.mibUp(refused.smallestBudgetBytes()) : -1;
    if (estimate > Budget.mib(budget) && (smallest < 0 || estimate < needMib)) {
      // the planner's estimate is below what the unmodified graph needs: try plans there (the
      // planner's, then the other modes'), and where none trains, at most CHECKS - 1 budgets
      // an eighth higher each, while they stay below the unmodified graph's need
      long at = estimate;
      List<String> misses = new ArrayList<>();
      String tried = planAndProbe(tg, planner, alternatives, o, at);
      for (int k = 1; k < CHECKS && tried != null; k++) {
        long higher = Budget.mibUp((at << 20) + Math.max(1L << 20, (at << 20) / 8));
        if (smallest >= 0 && higher >= needMib) {
          break;
        }
        misses.add(at + " MiB: " + tried);
        at = higher;
        tried = planAndProbe(tg, planner, alternatives, o, at);
      }
      String before = misses.isEmpty() ? "" : " (" + String.join("; ", misses) + ")";
      if (tried == null) {
        smallest = at << 20;
        needMib = at;
        how = at == estimate ? "the planner's estimate; checked: a plan for " + at
            + " MiB trains at it" : "checked: a plan for " + at + " MiB trains at it, above "
            + "the planner's estimate of " + estimate + " MiB" + before;
        checked = true;
      } else if (smallest < 0) {
        smallest = estimate << 20;
        needMib = estimate;
        how = "the planner's estimate; not confirmed: " + tried + before;
        checked = true;
      } else {
        // no plan trained up to the last check, and the graph measured needs far more: bisect
        // plans between the two, so the figure named is one a plan was seen to train at, not
        // what the unmodified graph needs (DenseNet at 17 MiB: plans for 18, 21 and 24 MiB ran
        // out of memory, 77 MiB was named, and a plan for 26 MiB trains)
        long lo = at;
        long hi = -1;
        for (int k = 0; k < BISECTIONS; k++) {
          long top = hi > 0 ? hi : needMib;
          long mid = (lo + top) / 2;
          if (mid <= lo || top - lo <= Math.max(1, lo / 16)) {
            break;
          }
          String why = planAndProbe(tg, planner, alternatives, o, mid);
          LOG.info("[LMS][probe] Bisecting plans between {} and {} MiB, at {} MiB: {}", lo,
              top, mid, why == null ? "a plan trains" : why);
          if (why == null) {
            hi = mid;
          } else {
            lo = mid;
          }
        }
        if (hi > 0) {
          misses.add(at + " MiB: " + tried);
          how = "checked: a plan for " + hi + " MiB trains at it, bisected between the last "
              + "budget where none did (" + lo + " MiB) and what the " + (failed != null
              ? "last plan" : "unmodified graph") + " was measured to need (" + needMib
              + " MiB); the planner's estimate, " + estimate + " MiB, did not hold ("
              + String.join("; ", misses) + ")";
          smallest = hi << 20;
          needMib = hi;
          checked = true;
        } else {
          how += "; the planner's estimate, " + estimate + " MiB, did not hold: " + tried
              + before;
        }
      }
    }
    if (!checked && free.fits()) {
      // the budget itself did not work: the smallest one that could is above it
      needMib = Math.max(needMib, Budget.mib(budget) + 1);
      // check the estimate (the same graph, init and two steps, at that budget); when it runs out
      // of memory, raise it by the failed allocation (at least 1/8) and check again, 3 checks
      List<Long> failedAt = new ArrayList<>();
      String note = null;
      String layout = failed == null || failed.initLast().isEmpty() ? ""
          : " with init in one allocator region of it, " + String.join(", ", failed.initLast())
              + " created last";
      for (int k = 0; k < CHECKS && note == null; k++) {
        RunResult check = runAt(tg, failed != null ? failed.at(tg, needMib << 20) : measure,
            needMib << 20, o);
        LOG.info("[LMS][probe] The estimated smallest budget, {} MiB: {}", needMib,
            check.fits() ? "trains" : "does not train");
        if (check.fits()) {
          note = "checked: it trains at " + needMib + " MiB" + layout + (failedAt.isEmpty() ? ""
              : " (" + failedAt + " MiB ran out of memory)");
        } else if (!check.oom()) {
          note = "not confirmed: at " + needMib + " MiB it failed: " + check.error();
        } else if (k == CHECKS - 1) {
          note = "not confirmed: at " + needMib + " MiB it still ran out of memory, so it "
              + "needs more";
        } else {
          failedAt.add(needMib);
          long more = Math.max(failedAllocation(check.error()), (needMib << 20) / 8);
          needMib = Budget.mibUp((needMib << 20) + more);
        }
      }
      if (note.startsWith("checked") && o.serialOrder() && failed != null) {
        // the plan runs in a fixed order, so the same graph needs the same memory in every run:
        // bisect between the budget (or the last check that ran out of memory) and the figure
        // checked, and name the budget that gives the smallest one it trains at the headroom
        long lo = failedAt.isEmpty() ? Budget.mib(budget) : failedAt.get(failedAt.size() - 1);
        long hi = needMib;
        for (int k = 0; k < BISECTIONS && hi - lo > 1; k++) {
          long mid = (lo + hi) / 2;
          RunResult at = runAt(tg, failed.at(tg, mid << 20), mid << 20, o);
          LOG.info("[LMS][probe] Bisecting the smallest budget: at {} MiB the plan {}", mid,
              at.fits() ? "trains" : "does not train");
          if (at.fits()) {
            hi = mid;
          } else {
            lo = mid;
          }
        }
        if (hi < needMib) {
          long named = Math.min(needMib, withMargin(hi << 20));
          note += String.format(Locale.ROOT, ", and, bisected, at %d MiB%s, so about %d MiB "
              + "with the probe's %d%% margin", hi, hi - lo == 1 ? " (not at " + lo + ")" : "",
              named, Math.round(HEADROOM * 100));
          needMib = named;
        }
      }
      smallest = needMib << 20;
      how += "; " + note;
    }
    String why = refused != null
        ? "the planner refuses it and the unmodified graph ran out of memory"
        : String.format(Locale.ROOT, "%d plan%s and the unmodified graph did not pass their "
            + "probes (out of memory, or less than %d%% of the budget left free and no run "
            + "under a limit that much tighter)",
            plansProbed(attempts), plansProbed(attempts) == 1 ? "" : "s",
            Math.round(HEADROOM * 100));
    String message = smallest > 0
        ? String.format(Locale.ROOT, "A budget of %d MiB cannot work: %s; the smallest budget "
            + "that could work is about %d MiB (%s).", Budget.mib(budget), why, needMib, how)
        : String.format(Locale.ROOT, "A budget of %d MiB cannot work: %s; no smallest budget "
            + "could be measured (%s).", Budget.mib(budget), why, how);
    return new Outcome(Verdict.REFUSED, null, attempts, replans, smallest, message);
  }

  /**
   * Plans for {@code mib} MiB at the first memory ratio with {@code planner}, then with each of
   * the {@code alternatives}, and runs each plan there until one trains; a plan identical to one
   * already run is not run again (as {@link #alternative} skips them).
   *
   * @return null when a plan trains, else what happened to the first planner's
   */
  private static String planAndProbe(TrainingGraph tg, Planner planner,
      List<Planner> alternatives, Options o, long mib) {
    List<Planner> all = new ArrayList<>();
    all.add(planner);
    all.addAll(alternatives);
    List<GraphDef> seen = new ArrayList<>();
    String first = null;
    for (Planner p : all) {
      String why = planAndRun(tg, p, o, mib, seen);
      if (why == null) {
        return null;
      }
      if (first == null) {
        first = why;
      }
    }
    return first;
  }

  /**
   * Plans for {@code mib} MiB and runs the plan there, unless its graph is in {@code seen} (then
   * it is not run again); adds the graph to {@code seen}.
   *
   * @return null when it trains, else why not
   */
  private static String planAndRun(TrainingGraph tg, Planner planner, Options o, long mib,
      List<GraphDef> seen) {
    LmsResult p = null;
    // as closeLoop: where the first ratio is refused, the plan at the smaller margin, then at
    // none
    double[] closer = closerRatios(o.memRatio());
    for (int i = -1; i < closer.length && p == null; i++) {
      double ratio = i < 0 ? o.memRatio() : closer[i];
      try {
        p = planner.plan(new Budget(mib << 20, ratio));
      } catch (PlanningException e) {
        LOG.debug("[LMS][probe] {} MiB at memory ratio {}: {}", mib, ratio, e.getMessage());
      }
    }
    if (p == null) {
      return "the planner refuses " + mib + " MiB too";
    }
    if (seen.contains(p.graphDef())) {
      return "the same plan for " + mib + " MiB again";
    }
    seen.add(p.graphDef());
    RunResult r = runAt(tg, p.graphDef(), mib << 20, o);
    LOG.info("[LMS][probe] A plan ({}) for {} MiB: {}", plannerLabel(p), mib,
        r.fits() ? "trains" : "does not train");
    return r.fits() ? null : "a plan for " + mib + " MiB " + (r.oom() ? "ran out of memory"
        : "failed: " + r.error());
  }

  /** Probes one graph: init and two steps, the second traced, under the budget, in a worker JVM. */
  private static Attempt probe(TrainingGraph tg, GraphDef gd, int number, String graph,
      String planner, double ratio, long predicted, Options o) {
    RunResult r = runAt(tg, gd, o.budgetBytes(), o);
    long failed = r.oom() ? failedAllocation(r.error()) : -1;
    Attempt a = new Attempt(number, graph, planner, ratio, predicted, r.fits(), r.oom(),
        r.fits() ? r.peakBytes() : -1, failed, r.error(), -1, false);
    LOG.info("[LMS][probe] Try {} ({}): predicted peak {}, {}", number, a.what(),
        predicted < 0 ? "unknown" : mib(predicted), r.fits()
            ? "measured peak " + mib(r.peakBytes()) + " under " + Budget.mib(o.budgetBytes())
                + " MiB"
            : r.oom() ? "ran out of memory" + (failed > 0 ? " allocating " + mib(failed) : "")
                : "failed: " + r.error());
    long tighter = tighterLimit(o.budgetBytes());
    if (a.fits() && !a.passed(o.budgetBytes()) && o.serialOrder() && !graph.equals("unmodified")
        && tighter > 0) {
      // the traced peak left less than the headroom free, but under a tight limit it overstates
      // the need (Attempt.passed): run the same graph, which runs in a fixed order, under a
      // limit the headroom tighter; if it trains there, the budget has that margin
      RunResult t = runAt(tg, gd, tighter, o);
      LOG.info("[LMS][probe] Try {}: its traced peak left less than {}% of {} MiB free; under "
          + "{} MiB it {}", number, Math.round(HEADROOM * 100), Budget.mib(o.budgetBytes()),
          Budget.mib(tighter), t.fits() ? "trains too, so it passes"
              : t.oom() ? "runs out of memory, so it does not pass" : "failed: " + t.error());
      a = a.withTighter(tighter, t.fits());
    }
    return a;
  }

  /**
   * The limit a probe whose traced peak left less than {@link #HEADROOM} free is run at once
   * more: the budget less the headroom, in whole MiB (the unit of the BFC limit), at least 1 MiB
   * below the budget's whole MiB; -1 when no such limit is left.
   */
  public static long tighterLimit(long budgetBytes) {
    long whole = Budget.mib(budgetBytes);
    long t = Math.min(whole - 1, (long) Math.floor(whole * (1 - HEADROOM)));
    return t > 0 ? t << 20 : -1;
  }

  /**
   * The smallest budget, in whole MiB, whose {@link #tighterLimit} is at least {@code
   * budgetBytes}' whole MiB: where a graph ran under this budget, a probe of it there passes.
   */
  static long withMargin(long budgetBytes) {
    long whole = Budget.mib(budgetBytes);
    long at = whole + 1;
    while (tighterLimit(at << 20) < whole << 20) {
      at++;
    }
    return at;
  }

  /** Init and the probe's steps of {@code gd} under {@code limitBytes}, seeded as {@code o}. */
  private static RunResult runAt(TrainingGraph tg, GraphDef gd, long limitBytes, Options o) {
    return run(tg, gd, new BudgetedRunner.Options(limitBytes, STEPS, o.seed(), true,
        RewriterConfig.MemOptType.DEFAULT_MEM_OPT, o.timeout()));
  }

  private static RunResult run(TrainingGraph tg, GraphDef gd, BudgetedRunner.Options bo) {
    try {
      return BudgetedRunner.run(new TrainingGraph(gd, tg.manifest()), bo);
    } catch (IOException e) {
      throw new UncheckedIOException("could not start a probe worker", e);
    }
  }

  /** The op an out-of-memory message names as the one whose request failed, or null. */
  static String failedOp(String message) {
    if (message == null) {
      return null;
    }
    Matcher m = FAILED_OP.matcher(message);
    return m.find() ? m.group(1) : null;
  }

  /**
   * The size of the allocation an OOM message names: BFC's "(rounded to N)", else its
   * "allocate 14.30MiB", else TensorFlow's "OOM when allocating tensor with shape[...] and type
   * float"; -1 when none is found.
   */
  static long failedAllocation(String message) {
    if (message == null) {
      return -1;
    }
    Matcher m = ROUNDED.matcher(message);
    if (m.find()) {
      return Long.parseLong(m.group(1));
    }
    m = ALLOCATE.matcher(message);
    if (m.find()) {
      double v = Double.parseDouble(m.group(1));
      int shift = switch (m.group(2)) {
        case "KiB" -> 10;
        case "MiB" -> 20;
        case "GiB" -> 30;
        default -> 0;
      };
      return (long) Math.ceil(v * (1L << shift));
    }
    m = SHAPE.matcher(message);
    if (m.find()) {
      long n = 1;
      for (String d : m.group(1).split(",")) {
        if (!d.isEmpty()) {
          n *= Long.parseLong(d);
        }
      }
      int size = switch (m.group(2)) {
        case "double", "int64", "uint64", "complex64" -> 8;
        case "half", "bfloat16", "int16", "uint16" -> 2;
        case "int8", "uint8", "bool" -> 1;
        default -> 4;
      };
      return n * size;
    }
    return -1;
  }

  /** An LmsResult for training the unmodified graph (model and prediction of the graph). */
  private static LmsResult unmodified(TrainingGraph tg, LmsResult known) {
    if (known != null) {
      MemoryPlan none = MemoryPlan.unchanged("none (unmodified, probed)", known.model(),
          PlanningContext.of(Budget.none(), TensorPolicy.builtin(known.model())),
          known.predictedPeakBefore());
      return new LmsResult(tg.graphDef(), none, known.model(), known.stats(),
          known.predictedPeakBefore(), known.planningMs(), 0, null);
    }
    long t0 = System.nanoTime();
    var m = tg.manifest();
    int batch = (int) Math.min(Integer.MAX_VALUE, m.batchSize());
    DataflowGraph model = GraphImporter.importGraph(tg.graphDef(), m.feedShapes(), batch,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, m.runOps());
    long peak = SwapAutoTuner.simulatePeak(model, SwapPlan.empty(
        SwapParams.defaults().toBuilder().batchSize(batch).build()));
    MemoryPlan none = MemoryPlan.unchanged("none (unmodified, probed)", model,
        PlanningContext.of(Budget.none(), TensorPolicy.builtin(model)), peak);
    return new LmsResult(tg.graphDef(), none, model, GraphStats.of(model), peak,
        (System.nanoTime() - t0) / 1_000_000, 0, null);
  }

  /** A plan's planner as the probe's tries name it ("none" for the graph as given). */
  private static String plannerLabel(LmsResult plan) {
    return plan.planner() == null ? "none" : plan.planner();
  }

  /** The tries that probed a plan (not the unmodified graph). */
  private static int plansProbed(List<Attempt> attempts) {
    return (int) attempts.stream().filter(a -> a.graph().equals("plan")).count();
  }

  /** Bytes in MiB to one decimal; under 0.1 MiB (a small allocation that failed) in KiB. */
  static String mib(long bytes) {
    return dev.lms4j.core.report.Sizes.allocation(bytes);
  }
}
