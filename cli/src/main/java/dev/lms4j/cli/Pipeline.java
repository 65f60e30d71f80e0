package dev.lms4j.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.MemoryPlan;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.report.Report;
import dev.lms4j.core.report.Sizes;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.GraphStats;
import dev.lms4j.tf.InitNeeds;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsBuilder;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.SwapRewriter;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.Probe;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.tf.run.StepRecord;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/** Plan (and optionally run) a training graph the way train, run, analyze and demo share. */
final class Pipeline {
  private Pipeline() {}

  /** What a pipeline produced. */
  record Outcome(Report report, TrainingGraph graph, LmsResult lms, RunResult run, int exitCode) {}

  /**
   * Plans {@code tg} for the options; runs {@code steps} steps in a worker when {@code steps > 0}.
   * Bad options throw {@link IllegalArgumentException} before anything runs.
   */
  static Outcome execute(String name, TrainingGraph tg, LmsOptions o, int steps, PrintStream out)
      throws IOException {
    return execute(name, tg, o, steps, true, out);
  }

  /**
   * As {@link #execute(String, TrainingGraph, LmsOptions, int, PrintStream)}; with {@code probe}
   * (and a budget, an LMS mode and steps to run) the plan's first step is probed under the budget
   * before training ({@link Probe}): re-planned when it runs out of memory, the unmodified graph
   * trained where the planner refuses but TensorFlow fits.
   */
  static Outcome execute(String name, TrainingGraph tg, LmsOptions o, int steps, boolean probe,
      PrintStream out) throws IOException {
    int batch = (int) tg.manifest().batchSize();
    o.validate(batch);
    LmsMode mode = o.mode();
    long budget = o.budgetBytes();
    SwapParams params = o.params(batch);
    if ((mode.with(params).needsBudget() || mode.with(params) == LmsMode.TFLMS) && budget <= 0
        && params.autoTune()) {
      throw new IllegalArgumentException("--lms " + mode.cliName() + " needs --budget (or the "
          + "parameters --swapout-threshold, --swapin-ahead and --swapin-groupby)");
    }
    Report report = new Report(name, batch, budget, mode.cliName());
    Path tmpSwap = null;
    LmsResult lms;
    TrainingGraph toRun = tg;
    try {
      if (mode == LmsMode.OFF) {
        lms = analyzeOnly(tg, params, o.backwardScope());
      } else {
        Path swapDir = o.swapDir;
        if (params.tier() == Tier.DISK && swapDir == null) {
          tmpSwap = Files.createTempDirectory("lms4j-swap");
          swapDir = tmpSwap;
        } else if (swapDir != null) {
          Files.createDirectories(swapDir);
        }
        LmsBuilder b = o.ratio(Lms.builder().params(params)).swapDir(swapDir).mode(mode);
        o.configure(b);
        if (budget > 0) {
          b.budget(budget);
        }
        Lms planner = b.build();
        if (probe && steps > 0 && budget > 0) {
          Probe.Outcome po = Probe.closeLoop(tg, planner,
              Probe.Options.of(budget, planner));
          Reports.probe(report, po);
          printProbe(po, out);
          if (po.verdict() == Probe.Verdict.REFUSED) {
            report.error(po.message());
            report.extra("smallest_budget").put("bytes", po.smallestBudgetBytes());
            System.err.println("lms4j: does not fit: " + po.message());
            return new Outcome(report, tg, null, null, 1);
          }
          if (po.verdict() == Probe.Verdict.FAILED) {
            // not a memory verdict: the run below reports the graph's own error, if any
            out.println("The probe could not decide (" + po.message() + "); training the plan "
                + "unprobed");
          }
          lms = po.result();
        } else {
          try {
            lms = planner.rewrite(tg);
          } catch (PlanningException e) {
            report.error(e.getMessage());
            report.extra("smallest_budget").put("bytes", e.smallestBudgetBytes());
            System.err.println("lms4j: does not fit: " + e.getMessage());
            return new Outcome(report, tg, null, null, 1);
          }
        }
        toRun = new TrainingGraph(lms.graphDef(), tg.manifest());
      }
      GraphStats s = lms.stats();
      SwapPlan plan = lms.plan();
      var rp = lms.recompute();
      Reports.lms(report, lms, mode == LmsMode.OFF ? null : planJson(lms));
      distances(report, lms.model());
      out.printf(Locale.ROOT, "%s: %d ops, %s of parameters, predicted peak %s -> %s%s%n",
          name, s.ops(), Sizes.mib(s.parameterBytes()), Sizes.mib(lms.predictedPeakBefore()),
          Sizes.mib(lms.predictedPeakAfter()), mode == LmsMode.OFF ? " (LMS off)"
              : SwapRewriter.isRewritten(tg.graphDef())
                  ? " (a graph lms4j already rewrote: not planned again)"
              : !lms.rewritten() ? " (LMS not necessary)"
              : !lms.memoryPlan().needed() && lms.scheduling() == null
                  && !lms.preRewrites().changed() ? " (no plan needed)"
              : String.format(Locale.ROOT, " (%d ops recomputed in %d groups; %d swap-outs, %d "
                  + "swap-ins, %s)", rp.clonedOps(), rp.groups().size(), plan.swapOuts().size(),
                  plan.swapInCount(), Sizes.mib(plan.swapOutBytes())));
      if (lms.scheduling() != null) {
        var sc = lms.scheduling();
        out.printf(Locale.ROOT, "Scheduling: %s order, %d AddN chains, %d control edges; "
            + "simulated peak %s -> %s%n", sc.kind().name().toLowerCase(Locale.ROOT),
            sc.chains().size(), sc.edges().size(), Sizes.mib(sc.peakBefore()),
            Sizes.mib(sc.peakAfter()));
      }
      if (lms.initLayout() != null) {
        out.println("Init order: " + lms.initLayout().describe());
      }
      initNeed(tg, o, params.batchSize(), budget, report, out);
      if (steps <= 0) {
        return new Outcome(report, toRun, lms, null, 0);
      }
      out.printf(Locale.ROOT, "Training %d steps %s...%n", steps, budget > 0
          ? "under a budget of " + Sizes.mib(budget) : "without a budget");
      RunResult r = BudgetedRunner.run(toRun, BudgetedRunner.Options.of(budget, steps),
          rec -> out.printf(Locale.ROOT, "  step %d/%d  loss %.6f  %.0f ms%n", rec.step(), steps,
              rec.loss(), rec.ms()));
      fill(report, r);
      if (r.fits()) {
        out.printf(Locale.ROOT, "Trained %d steps: median %.0f ms/step, measured peak %s%s%n",
            steps, r.medianMs(), r.peakBytes() >= 0 ? Sizes.mib(r.peakBytes()) : "unknown",
            withScratch(r));
      } else {
        out.println("The run failed: " + r.error());
      }
      return new Outcome(report, toRun, lms, r, r.fits() ? 0 : 1);
    } finally {
      if (tmpSwap != null) {
        deleteTree(tmpSwap);
      }
    }
  }

  /**
   * What init as written alone needs of the allocator model ({@link InitNeeds}), in the report
   * ({@code init_need}); a line where it needs more than the budget in the graph's own order
   * (and so in TensorFlow's, some of the time): the initializers' temporaries set that floor,
   * which no plan of the step lowers.
   */
  static void initNeed(TrainingGraph tg, LmsOptions o, int batchSize, long budget,
      Report report, PrintStream out) {
    // the batch size the planner imported the step with: the same graph model, kept
    BfcReplay.InitNeed need = InitNeeds.of(tg.graphDef(), tg.manifest(), batchSize,
        o.backwardScope());
    if (need == null || need.bestMib() <= 0) {
      return;
    }
    report.extra("init_need").put("best_bytes", need.bestMib() << 20)
        .put("graph_order_bytes", Math.max(0, need.graphOrderMib()) << 20);
    long inGraphOrder = need.graphOrderMib() > 0 ? need.graphOrderMib() << 20 : Long.MAX_VALUE;
    if (budget > 0 && inGraphOrder > budget) {
      out.printf(Locale.ROOT, "Init alone needs %d to %s MiB of TensorFlow's allocator as "
          + "written (in the best order, and in the graph's own; TensorFlow's order varies "
          + "between processes): its initializers' temporaries, %s the %s budget, which no plan "
          + "of the step lowers%s%n", need.bestMib(),
          need.graphOrderMib() > 0 ? String.valueOf(need.graphOrderMib())
              : "more than " + InitNeeds.MAX_MIB,
          need.bestMib() << 20 > budget ? "more than" : "in some orders more than",
          Sizes.mib(budget), o.mode() == LmsMode.OFF ? ""
              : " (run and train probe it: where init runs out of memory, the variable whose "
              + "initializer failed is created last, in one region)");
    }
  }

  /** One line per probe, then the verdict. */
  static void printProbe(Probe.Outcome po, PrintStream out) {
    for (Probe.Attempt a : po.attempts()) {
      out.printf(Locale.ROOT, "Probe %d (%s): predicted peak %s, %s%s%n", a.number(), a.what(),
          a.predictedPeakBytes() < 0 ? "unknown" : Sizes.mib(a.predictedPeakBytes()),
          a.fits() ? "measured peak " + Sizes.mib(a.measuredPeakBytes())
              : a.oom() ? "ran out of memory" + (a.failedAllocationBytes() > 0
                  ? " allocating " + Sizes.allocation(a.failedAllocationBytes()) : "")
              : "failed",
          a.tighterLimitBytes() > 0 ? "; under " + Sizes.mib(a.tighterLimitBytes()) + " "
              + (a.tighterFits() ? "it trains too" : "it does not train") : "");
    }
    if (po.trains()) {
      out.println("Probe: " + po.message());
    }
  }

  /**
   * ", X with kernel scratch" where the kernels' transient allocations raise the traced peak by
   * a tenth of a MiB or more (TensorFlow's own convolution kernels' col buffers, which the
   * bytes in use after each op miss), else "".
   */
  static String withScratch(RunResult r) {
    return r.peakBytes() >= 0 && r.peakWithScratchBytes() - r.peakBytes() >= (1 << 20) / 10
        ? ", " + Sizes.mib(r.peakWithScratchBytes()) + " with kernel scratch" : "";
  }

  /** Fills the measured section from a run. */
  static void fill(Report report, RunResult r) {
    int n = r.steps().size();
    int[] no = new int[n];
    double[] loss = new double[n];
    double[] ms = new double[n];
    for (int i = 0; i < n; i++) {
      StepRecord s = r.steps().get(i);
      no[i] = s.step();
      loss[i] = s.loss();
      ms[i] = s.ms();
    }
    report.measured(r.fits(), r.peakBytes(), r.peakSource(), r.medianMs(), no, loss, ms);
    if (r.peakWithScratchBytes() >= 0) {
      // the traced peak counting what each kernel held while it ran (RunResult)
      report.json().with("measured").put("peak_with_scratch_bytes", r.peakWithScratchBytes());
    }
    if (!r.fits()) {
      report.error(r.error());
    }
  }

  /** TFLMS's producer-consumer distance histogram (power-of-two buckets of levels). */
  private static void distances(Report report, DataflowGraph model) {
    var h = dev.lms4j.core.memory.Liveness.distanceHistogram(model,
        dev.lms4j.core.graph.Levels.of(model));
    var arr = report.json().putArray("distance_histogram");
    h.forEach((k, v) -> arr.addObject().put("from_levels", k < 0 ? 0 : 1L << k)
        .put("to_levels", k < 0 ? 0 : (1L << (k + 1)) - 1).put("edges", v[0]).put("bytes", v[1]));
  }

  /** The graph model and simulated peak of {@code tg} without a plan (LMS off). */
  static LmsResult analyzeOnly(TrainingGraph tg, SwapParams params, String backwardScope) {
    long t0 = System.nanoTime();
    DataflowGraph model = GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(),
        params.batchSize(), backwardScope, tg.manifest().runOps());
    long peak = SwapAutoTuner.simulatePeak(model, SwapPlan.empty(params));
    MemoryPlan none = MemoryPlan.unchanged(LmsMode.OFF.cliName(), model,
        dev.lms4j.core.plan.PlanningContext.of(dev.lms4j.core.plan.Budget.none(),
            dev.lms4j.core.plan.TensorPolicy.builtin(model)).withParams(params), peak);
    return new LmsResult(tg.graphDef(), none, model, GraphStats.of(model), peak,
        (System.nanoTime() - t0) / 1_000_000, 0, null);
  }

  /**
   * The plan's parameters: the planner's name, whether LMS was needed, TFLMS's (tuned)
   * parameters when the planner has them, the recompute groups, and the ops recomputed by hand.
   */
  private static ObjectNode planJson(LmsResult lms) {
    MemoryPlan plan = lms.memoryPlan();
    ObjectNode n = new ObjectMapper().createObjectNode();
    n.put("planner", plan.planner()).put("lms_needed", lms.rewritten());
    SwapParams p = plan.params();
    if (p != null) {
      n.put("swapout_threshold", p.swapoutThreshold()).put("swapin_ahead", p.swapinAhead())
          .put("swapin_groupby", p.swapinGroupby()).put("sync_mode", p.syncMode())
          .put("tier", p.tier().cliName());
    } else if (!plan.swaps().isEmpty()) {
      n.put("tier", plan.swaps().params().tier().cliName());
    }
    n.put("groups", lms.recompute().groups().size());
    if (plan.planner().startsWith("manual-recompute")) {
      var ops = n.putArray("recompute_ops");
      plan.recomputeStages().get(0).groups().stream().flatMap(g -> g.ops().stream()).sorted()
          .forEach(ops::add);
    }
    return n;
  }

  static void deleteTree(Path dir) {
    try (var s = Files.walk(dir)) {
      s.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      // best effort
    }
  }
}
