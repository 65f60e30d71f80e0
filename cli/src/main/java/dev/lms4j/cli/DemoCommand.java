package dev.lms4j.cli;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.report.Report;
import dev.lms4j.core.report.Sizes;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code lms4j demo}: the headline scenario. */
@Command(name = "demo", mixinStandardHelpOptions = true,
    description = "The headline scenario: measure a CNN's peak without a budget, set the "
        + "budget to half of it, show the run without LMS failing with OOM, train with LMS "
        + "under the same budget, and compare side by side (losses must match).")
final class DemoCommand implements Callable<Integer> {
  @Mixin ModelArgs modelArgs;

  @Option(names = "--budget", paramLabel = "SIZE",
      description = "Budget (default: half the measured unbudgeted peak).")
  String budget;

  @Option(names = "--steps", defaultValue = "5") int steps;

  @Option(names = "--report", paramLabel = "FILE.json") Path report;

  @Override
  public Integer call() throws Exception {
    if (modelArgs.model == null) {
      // a ResNet deep enough that its activations, not its largest op, set the peak
      modelArgs.model = "resnet";
      modelArgs.options.putIfAbsent("blocks", "6");
    }
    if (steps < 1) {
      throw new IllegalArgumentException("--steps must be >= 1");
    }
    long fixedBudget = budget == null ? 0 : dev.lms4j.core.report.Sizes.parse(budget);
    if (fixedBudget > 0 && fixedBudget < 1 << 20) {
      throw new IllegalArgumentException("--budget " + budget + " is below 1 MiB, the smallest "
          + "budget TensorFlow's allocator limit can express");
    }
    Reports.checkWritable(report);
    TrainingGraph tg = modelArgs.build();
    int batch = (int) tg.manifest().batchSize();
    System.out.printf("lms4j demo: model %s, batch %d, %d steps on synthetic data%n",
        modelArgs.model, batch, steps);
    System.out.println("1/3 Training without a budget (to measure the peak and the losses)...");
    RunResult free = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, steps));
    if (!free.fits()) {
      System.out.println("The unbudgeted run failed: " + free.error());
      return Main.FAILED;
    }
    long b = fixedBudget > 0 ? fixedBudget : ((free.peakBytes() / 2) >> 20) << 20;
    System.out.printf(Locale.ROOT, "    peak %s, %.0f ms/step. Budget for the demo: %s%n",
        Sizes.mib(free.peakBytes()), free.medianMs(), Sizes.mib(b));
    System.out.println("2/3 Training without LMS under the budget...");
    RunResult off = BudgetedRunner.run(tg, BudgetedRunner.Options.of(b, steps));
    System.out.println("    " + (off.fits() ? "it fits (the budget is not tight)"
        : off.oom() ? "out of memory, as expected" : "failed: " + off.error()));
    System.out.println("3/3 Training with LMS under the budget...");
    LmsResult lr;
    try {
      lr = Lms.builder().budget(b).mode(dev.lms4j.core.plan.LmsMode.AUTO).build().rewrite(tg);
    } catch (PlanningException e) {
      System.out.println("    no plan fits: " + e.getMessage());
      return Main.FAILED;
    }
    RunResult on = BudgetedRunner.run(new TrainingGraph(lr.graphDef(), tg.manifest()),
        BudgetedRunner.Options.of(b, steps));
    System.out.println();
    System.out.printf("%-22s %-12s %-10s %-14s %-10s %s%n", "run", "budget", "result",
        "measured peak", "ms/step", "losses");
    row("no budget, no LMS", 0, free);
    row("budget, no LMS", b, off);
    row("budget, LMS", b, on);
    boolean same = on.fits() && Arrays.equals(on.losses(), free.losses());
    System.out.println();
    boolean tflms = lr.planner() != null && lr.planner().contains("tflms");
    System.out.printf(Locale.ROOT, "LMS (auto, %s planner, %s swap path): %d ops recomputed in "
        + "%d groups, %d swap-outs (%s), %d swap-ins%s; predicted peak %s -> %s%n",
        lr.planner() == null ? "no" : lr.planner(),
        dev.lms4j.tf.NativeSwap.uses(lr.graphDef()) ? "native" : "standard",
        lr.recompute().clonedOps(),
        lr.recompute().groups().size(), lr.plan().swapOuts().size(),
        Sizes.mib(lr.plan().swapOutBytes()), lr.plan().swapInCount(),
        lr.plan().swapOuts().isEmpty() || !tflms ? ""
            : ", parameters " + lr.plan().params().summary(),
        Sizes.mib(lr.predictedPeakBefore()), Sizes.mib(lr.predictedPeakAfter()));
    if (on.fits()) {
      System.out.printf(Locale.ROOT, "Losses with LMS %s the unbudgeted run's; step time %.2fx.%n",
          same ? "are bit-identical to" : "DIFFER from", on.medianMs() / free.medianMs());
    }
    System.out.println("(On this CPU-only machine the host tier moves bytes from the budgeted "
        + "allocator to the malloc heap: the process's resident memory does not drop.)");
    if (report != null) {
      Report r = new Report(modelArgs.model, batch, b, "auto");
      Reports.lms(r, lr, null);
      Pipeline.fill(r, on);
      com.fasterxml.jackson.databind.node.ObjectNode demo = r.json().putObject("demo");
      demo.put("no_lms_fits", off.fits())
          .put("unbudgeted_peak_bytes", free.peakBytes())
          .put("unbudgeted_ms_per_step_median", free.medianMs())
          .put("losses_identical", same);
      // the unbudgeted run's losses, so a reader can compare them with measured.steps itself
      com.fasterxml.jackson.databind.node.ArrayNode ref = demo.putArray("unbudgeted_losses");
      for (double l : free.losses()) {
        ref.add(l);
      }
      Reports.write(r, report);
    }
    return on.fits() && same ? 0 : Main.FAILED;
  }

  private static void row(String name, long budget, RunResult r) {
    System.out.printf(Locale.ROOT, "%-22s %-12s %-10s %-14s %-10s %s%n", name,
        budget > 0 ? Sizes.mib(budget) : "none", r.fits() ? "trained" : r.oom() ? "OOM" : "failed",
        r.peakBytes() >= 0 ? Sizes.mib(r.peakBytes()) : "-",
        r.fits() ? String.format(Locale.ROOT, "%.0f", r.medianMs()) : "-",
        r.steps().isEmpty() ? "-" : Arrays.toString(Arrays.stream(r.losses())
            .mapToObj(x -> String.format(Locale.ROOT, "%.4f", x)).toArray()));
  }
}
