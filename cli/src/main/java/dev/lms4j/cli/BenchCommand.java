package dev.lms4j.cli;

import dev.lms4j.bench.CheckpointBench;
import dev.lms4j.bench.CorpusBench;
import dev.lms4j.bench.ModelBench;
import dev.lms4j.bench.NativeSwapBench;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code lms4j bench}: the benchmark suites. */
@Command(name = "bench", mixinStandardHelpOptions = true,
    description = {"Run a benchmark suite and write JSON and Markdown under --out.",
        "quick/full/smoke/steptime: the side-by-side model benchmark. For each model and each "
            + "method (no LMS, grappler's memory_optimization modes, tflms, remat, auto, sqrt): the "
            + "smallest budget that trains (bisection), step time at 50/33/25%% of the no-LMS "
            + "budget vs unbudgeted, predicted vs measured peak, the largest batch and input "
            + "size at a fixed budget against the physical limit, planning time at 10k and 100k "
            + "ops; quick and smoke also measure auto+probe (auto's plan probed under the "
            + "budget first, as run and train do). quick takes about 45 minutes on 2 cores "
            + "(ResNet-50 27, GPT-2 19: auto+probe's size searches are the slow part); smoke (an "
            + "MLP; no LMS, grappler's recomputation, tflms, auto and auto+probe) about 3. "
            + "steptime: ResNet-50's "
            + "step times only (no LMS, tflms, swap, remat-xla, auto, auto+probe) at 50, 33 "
            + "and 25%% of the no-LMS budget, in 9 rounds, about 15 minutes; --model for "
            + "another model (e.g. gpt2).",
        "corpus: per corpus family (graphs built as TF Java users build them: resource "
            + "variables, framework optimizers, unrolled RNNs, embeddings, U-Net, ...), "
            + "TensorFlow's own smallest budget under each grappler memory_optimization mode "
            + "and each lms4j mode's (tflms, swap, remat, auto as Lms.rewrite hands its plans "
            + "over, and auto + probe and swap + probe as run and train use them) as a "
            + "fraction of it, predicted vs measured peak; --size bench (default) or small, "
            + "--families a,b, --tag NAME "
            + "(files corpus-NAME.json/.md). About an hour at bench size on 2 cores.",
        "fidelity: how well the memory model predicts TensorFlow. It RUNS each graph: one "
            + "traced step, then bisections of the smallest budget that trains without LMS and "
            + "with auto at 60%% of it. Prints per op the simulated bytes in use (without "
            + "scratch, with estimated and with traced kernel scratch, and the allocator "
            + "model's chunks) against the traced ones, sorted by the gap, then predicted "
            + "peaks vs the real minimum, and one more step traced at that minimum against "
            + "the allocator model under the same limit, op by op (fidelity.json/.md). "
            + "Default graphs: a few zoo models and corpus families; --model NAME [--batch N] "
            + "or --families a,b [--size] for others. About 5 minutes per graph on 2 cores.",
        "acceptance: do the plans lms4j accepts train? Per graph (zoo lenet, resnet, gpt2 and "
            + "every corpus family; or --model / --families), at 60 and 85%% of what the "
            + "allocator model says the graph needs and at memory ratios 0.8 and 0.95: auto's "
            + "plan run without the probe (trains or out of memory), then the probe's verdict "
            + "and re-plans, and the graph it hands back run again (acceptance.json/.md). "
            + "About an hour on 2 cores.",
        "fidelity-planners: the memory model against the real allocator, per planner. Per "
            + "graph (the acceptance suite's; or --model / --families), the allocator model's "
            + "predicted need against the smallest budget that really trains (bracketed from "
            + "the prediction, bisected to 3%%), without LMS and with tflms, swap, remat and "
            + "auto at 60 and 85%% of the no-LMS prediction; each plan also runs at its budget, "
            + "and the probe's verdict, re-plans and the graph it hands back run again "
            + "(fidelity-planners.json/.md; --append keeps the graphs already there that this "
            + "run does not measure). About 8 minutes per graph on 2 cores.",
        "checkpoint: save/restore throughput of the checkpoint backends (1 GiB) and the "
            + "overhead of asynchronous checkpoints.",
        "native: swap bandwidth of the standard-op path, the native path and memcpy, and step "
            + "time with LMS at 50/40/25%% of the no-LMS budget per path, with and without "
            + "overlap.",
        "soak: per tier (host, disk, and the same steps without LMS) one worker runs 2000 "
            + "budgeted steps of mlp under 32 MiB with tflms: a 1000-step warm-up, then 1000 "
            + "measured steps. Prints per tier whether the worker's RSS is flat after the "
            + "warm-up (least-squares slope and growth over the last 300 steps at most 0.5 MiB "
            + "per 1000 steps) and whether the swap files go back to zero bytes. About 25 "
            + "minutes."})
final class BenchCommand implements Callable<Integer> {
  @Option(names = "--suite", defaultValue = "quick",
      description = "quick (default), full, smoke, steptime, corpus, fidelity, acceptance, "
          + "fidelity-planners, checkpoint, native or soak.")
  String suite;

  @Option(names = "--out", defaultValue = "docs/bench", description = "Output directory "
      + "(default ${DEFAULT-VALUE}).")
  Path out;

  @Option(names = "--model", paramLabel = "NAME", description = "Benchmark this zoo model "
      + "only (with the suite's methods, budgets and resolution).")
  String model;

  @Option(names = "--batch", paramLabel = "N", description = "Base batch for --model (default: "
      + "the model's).")
  Integer batch;

  @Option(names = {"-o", "--option"}, paramLabel = "KEY=VALUE",
      description = "Model option for --model, e.g. -o image=32.")
  java.util.Map<String, String> options = new java.util.LinkedHashMap<>();

  @Option(names = "--serial-order", negatable = true, defaultValue = "true",
      fallbackValue = "true",
      description = "corpus suite: lms4j's modes run their rewritten graphs in one fixed order, "
          + "as run and train do by default; --no-serial-order measures them in TensorFlow's "
          + "own order.")
  boolean serialOrder;

  @Option(names = "--size", paramLabel = "small|bench", defaultValue = "bench",
      description = "corpus suite: the graphs' size (default ${DEFAULT-VALUE}).")
  String size;

  @Option(names = "--families", paramLabel = "NAME,...", split = ",",
      description = "corpus suite: only these families (default: all).")
  java.util.List<String> families;

  @Option(names = "--tag", paramLabel = "NAME", description = "corpus suite: results go to "
      + "corpus-NAME.json and .md (default: the size).")
  String tag;

  @Option(names = "--resolution", paramLabel = "FRACTION", defaultValue = "0.08",
      description = "corpus suite: bisection step as a fraction of TensorFlow's minimum "
          + "(default ${DEFAULT-VALUE}).")
  double resolution;

  @Option(names = "--append", description = "corpus and fidelity-planners suites: keep the "
      + "families (graphs) already in the result file that this run does not measure.")
  boolean append;

  @Override
  public Integer call() throws Exception {
    if (tag != null && !suite.equals("corpus")) {
      // the other suites write under a fixed name: a tag given there would be lost silently
      throw new IllegalArgumentException("--tag goes with the corpus suite (the " + suite
          + " suite writes its own file names under --out)");
    }
    if (suite.equals("fidelity") || suite.equals("acceptance")
        || suite.equals("fidelity-planners")) {
      return graphSuite();
    }
    if (suite.equals("corpus")) {
      if (model != null) {
        throw new IllegalArgumentException("--model does not go with the corpus suite");
      }
      dev.lms4j.train.corpus.Corpus.Size sz = switch (size) {
        case "small" -> dev.lms4j.train.corpus.Corpus.Size.SMALL;
        case "bench" -> dev.lms4j.train.corpus.Corpus.Size.BENCH;
        default -> throw new IllegalArgumentException("--size must be small or bench");
      };
      java.util.List<dev.lms4j.train.corpus.Corpus.Family> fs = families == null
          ? dev.lms4j.train.corpus.Corpus.families()
          : families.stream().map(dev.lms4j.train.corpus.Corpus::getOrThrow).toList();
      if (!(resolution > 0 && resolution < 1)) {
        throw new IllegalArgumentException("--resolution must be between 0 and 1");
      }
      CorpusBench.run(tag == null ? size : tag, fs, sz, resolution, append, serialOrder, out,
          System.out);
      return 0;
    }
    if (model != null && (suite.equals("checkpoint") || suite.equals("native")
        || suite.equals("soak"))) {
      throw new IllegalArgumentException(
          "--model goes with the quick, full, smoke or steptime suite");
    }
    if (batch != null && batch < 1) {
      throw new IllegalArgumentException("--batch must be >= 1");
    }
    if (!java.util.Set.of("quick", "full", "smoke", "steptime", "checkpoint", "native", "soak")
        .contains(suite)) {
      throw new IllegalArgumentException("--suite must be quick, full, smoke, steptime, "
          + "corpus, fidelity, acceptance, fidelity-planners, checkpoint, native or soak");
    }
    Paths.checkDirectory(out, "--out");
    if (model != null) {
      dev.lms4j.train.models.ModelZoo.getOrThrow(model);
    }
    switch (suite) {
      case "quick", "full", "smoke", "steptime" -> ModelBench.run(model == null
          ? ModelBench.suite(suite)
          : ModelBench.forModel(ModelBench.suite(suite), model, batch == null ? 0 : batch,
              options), out, System.out);
      case "checkpoint" -> CheckpointBench.run(1L << 30, out, System.out);
      case "native" -> NativeSwapBench.run(out, System.out);
      case "soak" -> dev.lms4j.bench.SoakBench.run(out, 2000, 1000, System.out);
      default -> throw new IllegalArgumentException("--suite must be quick, full, smoke, "
          + "steptime, corpus, fidelity, acceptance, fidelity-planners, checkpoint, native or "
          + "soak");
    }
    return 0;
  }

  /**
   * fidelity, acceptance and fidelity-planners: graphs from --model / --families, else the
   * suite's defaults.
   */
  private Integer graphSuite() throws Exception {
    Paths.checkDirectory(out, "--out");
    if (batch != null && batch < 1) {
      throw new IllegalArgumentException("--batch must be >= 1");
    }
    java.util.List<dev.lms4j.bench.Fidelity.Case> cases = new java.util.ArrayList<>();
    if (model != null) {
      var spec = dev.lms4j.train.models.ModelZoo.getOrThrow(model);
      cases.add(dev.lms4j.bench.Fidelity.zoo(model, batch == null ? spec.defaultBatch() : batch,
          options));
    }
    if (families != null) {
      dev.lms4j.train.corpus.Corpus.Size sz = switch (size) {
        case "small" -> dev.lms4j.train.corpus.Corpus.Size.SMALL;
        case "bench" -> dev.lms4j.train.corpus.Corpus.Size.BENCH;
        default -> throw new IllegalArgumentException("--size must be small or bench");
      };
      for (String f : families) {
        dev.lms4j.train.corpus.Corpus.getOrThrow(f);
        cases.add(dev.lms4j.bench.Fidelity.corpus(f, sz));
      }
    }
    if (suite.equals("fidelity-planners")) {
      dev.lms4j.bench.PlannerFidelity.run(cases.isEmpty()
          ? dev.lms4j.bench.Acceptance.defaults() : cases, out, append, System.out);
    } else if (suite.equals("acceptance")) {
      dev.lms4j.bench.Acceptance.run(cases.isEmpty() ? dev.lms4j.bench.Acceptance.defaults()
          : cases, out, System.out);
    } else {
      dev.lms4j.bench.Fidelity.run(cases.isEmpty() ? dev.lms4j.bench.Fidelity.defaults()
          : cases, out, System.out);
    }
    return 0;
  }
}
