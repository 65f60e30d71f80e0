package dev.lms4j.bench;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanCosts;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.Probe;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.models.ModelSpec;
import dev.lms4j.train.models.ModelZoo;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.RewriterConfig;

/**
 * The side-by-side model benchmark (issues 3 and 5). For each model of a suite and each method
 * (no LMS, grappler's three {@code memory_optimization} modes, lms4j's tflms, swap, remat, auto
 * and sqrt), at the same budgets and batch sizes, in one run:
 * <ul>
 *   <li>the smallest budget that trains (bisection in MiB, each probe a budgeted worker JVM);
 *   <li>step time at 50%, 33% and 25% of the no-LMS smallest budget divided by the unbudgeted
 *       step time, runs alternating with unbudgeted ones; bytes swapped and recomputed;
 *       predicted against measured peak and step-time ratio;
 *   <li>capacity: the largest batch that trains 3 steps at a fixed budget (the no-LMS smallest
 *       budget at the model's base batch), its ratio to no-LMS, and the physical limit (the
 *       largest batch whose resident bytes plus largest single-op working set fit);
 *   <li>optionally the largest input size (image side, volume side, sequence length) at the base
 *       batch.
 * </ul>
 * Probes that only ask "does it fit" run two at a time (one per core); timed runs run alone.
 */
public final class ModelBench {
  private static final Logger LOG = LoggerFactory.getLogger(ModelBench.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  private ModelBench() {}

  /** A method the benchmark compares. */
  public enum Method {
    NONE("none", null, RewriterConfig.MemOptType.DEFAULT_MEM_OPT),
    GRAPPLER_RECOMPUTATION("grappler-recomp", null,
        RewriterConfig.MemOptType.RECOMPUTATION_HEURISTICS),
    GRAPPLER_HEURISTICS("grappler-heur", null, RewriterConfig.MemOptType.HEURISTICS),
    GRAPPLER_SCHEDULING("grappler-sched", null, RewriterConfig.MemOptType.SCHEDULING_HEURISTICS),
    TFLMS(LmsMode.TFLMS),
    /** lms4j's cost-based planner restricted to swapping. */
    SWAP(LmsMode.SWAP),
    REMAT(LmsMode.REMAT),
    /** XLA-style rematerialization (standard mode) under the budget. */
    REMAT_XLA(LmsMode.REMAT_XLA),
    AUTO(LmsMode.AUTO),
    /**
     * {@code auto} as {@code run}, {@code train} and the {@code Trainer}'s callback use it: its
     * plan probed under the budget first ({@code Probe.closeLoop}: other modes' plans, then
     * lower planning limits, when the probe runs out of memory); the graph the probe accepts
     * is what runs.
     */
    AUTO_PROBE("auto+probe", LmsMode.AUTO, RewriterConfig.MemOptType.DEFAULT_MEM_OPT, true),
    SQRT(LmsMode.SQRT);

    final String label;
    final LmsMode mode;
    final RewriterConfig.MemOptType memOpt;
    final boolean probe;

    Method(String label, LmsMode mode, RewriterConfig.MemOptType memOpt) {
      this(label, mode, memOpt, false);
    }

    Method(String label, LmsMode mode, RewriterConfig.MemOptType memOpt, boolean probe) {
      this.label = label;
      this.mode = mode;
      this.memOpt = memOpt;
      this.probe = probe;
    }

    /** An lms4j mode, labelled with its command-line name. */
    Method(LmsMode mode) {
      this(mode.cliName(), mode, RewriterConfig.MemOptType.DEFAULT_MEM_OPT);
    }

    boolean isLms() {
      return mode != null;
    }
  }

  /**
   * One model of a suite.
   *
   * @param model      zoo name
   * @param batch      base batch
   * @param options    zoo options
   * @param sizeOption the option that sets the input size (image, volume, seq), or null
   * @param steps      steps of a timed run
   * @param capacity   whether to measure the largest batch
   * @param inputSize  whether to measure the largest input size
   */
  public record Case(String model, int batch, Map<String, String> options, String sizeOption,
      int steps, boolean capacity, boolean inputSize) {}

  /**
   * A suite.
   *
   * @param name      quick, full, smoke
   * @param cases     the models
   * @param methods   the methods compared
   * @param fractions budgets as fractions of the no-LMS smallest budget
   * @param resolution relative resolution of the bisections (0.05 = within 5%)
   * @param rounds     timed rounds at each fraction: every round runs each method once (in a
   *                   rotated order) and one unbudgeted run; a method's ratio is the median of
   *                   its rounds' ratios to the faster neighbouring unbudgeted run
   * @param probedSizes whether auto+probe is in the capacity and input-size searches (each
   *                   batch that runs out of memory costs it a probe per try and its refusal a
   *                   checked figure, minutes in all: the quick suite's, not the smoke test's)
   */
  public record Suite(String name, List<Case> cases, List<Method> methods, double[] fractions,
      double resolution, int rounds, boolean probedSizes) {
    /** A suite whose size searches leave auto+probe out. */
    public Suite(String name, List<Case> cases, List<Method> methods, double[] fractions,
        double resolution, int rounds) {
      this(name, cases, methods, fractions, resolution, rounds, false);
    }
  }

  /** The configuration of a named suite. */
  public static Suite suite(String name) {
    // the full suite measures the planners' own plans; the quick suite adds auto as run and
    // train use it (auto+probe: a worker run per try, at the probe's first memory ratio), as the
    // smoke suite and the corpus do
    List<Method> all = java.util.Arrays.stream(Method.values())
        .filter(m -> m != Method.AUTO_PROBE).toList();
    List<Method> allProbed = List.of(Method.values());
    return switch (name) {
      case "quick" -> new Suite("quick", List.of(
          new Case("resnet50", 32, Map.of("image", "64", "width", "32"), "image", 6, true,
              true),
          new Case("gpt2", 8, Map.of("layers", "4", "width", "256", "seq", "128", "heads", "8"),
              "seq", 6, true, false)),
          allProbed, new double[] {0.50, 0.33, 0.25}, 0.06, 3, true);
      case "full" -> new Suite("full", List.of(
          new Case("resnet50", 32, Map.of("image", "64", "width", "32"), "image", 6, true,
              true),
          new Case("gpt2", 8, Map.of("layers", "4", "width", "256", "seq", "128", "heads", "8"),
              "seq", 6, true, true),
          new Case("resnet", 32, Map.of("blocks", "6"), "image", 6, true, true),
          new Case("resnet18", 32, Map.of("image", "64", "width", "32"), "image", 6, true, true),
          new Case("vgg16", 32, Map.of("image", "64", "width", "32", "fc", "256"), "image", 6,
              true, true),
          new Case("unet3d", 1, Map.of("side", "32", "width", "8"), "side", 6, true, true),
          new Case("mlp", 256, Map.of(), null, 6, true, false)),
          all, new double[] {0.50, 0.33, 0.25}, 0.03, 3);
      case "steptime" -> new Suite("steptime", List.of(
          // the quick suite's CNN, step times only, with three times its rounds: on a shared
          // 2-core machine a round's ratio moves by 10-30%, more than auto and swap differ; 25%
          // and auto+probe (auto as run and train use it) for issue 15's step-time target
          new Case("resnet50", 32, Map.of("image", "64", "width", "32"), "image", 6, false,
              false)),
          List.of(Method.NONE, Method.TFLMS, Method.SWAP, Method.REMAT_XLA, Method.AUTO,
              Method.AUTO_PROBE),
          new double[] {0.50, 0.33, 0.25}, 0.06, 9);
      case "smoke" -> new Suite("smoke", List.of(
          new Case("mlp", 1024, Map.of("layers", "4", "width", "512"), null, 4, true, false)),
          List.of(Method.NONE, Method.GRAPPLER_RECOMPUTATION, Method.TFLMS, Method.AUTO,
              Method.AUTO_PROBE),
          new double[] {0.8}, 0.15, 2);
      default -> throw new IllegalArgumentException("unknown suite '" + name
          + "' (expected quick, full, steptime or smoke)");
    };
  }

  /**
   * A suite over one model, with the methods, budgets and resolution of {@code base}; the input
   * size option is the model's {@code image}, {@code volume} or {@code seq} option if it has one.
   */
  public static Suite forModel(Suite base, String model, int batch, Map<String, String> options) {
    ModelSpec spec = ModelZoo.getOrThrow(model);
    String size = null;
    for (String k : List.of("image", "side", "volume", "seq")) {
      if (spec.defaultOptions().containsKey(k)) {
        size = k;
        break;
      }
    }
    int steps = base.cases().isEmpty() ? 5 : base.cases().get(0).steps();
    boolean capacity = base.cases().isEmpty() || base.cases().get(0).capacity();
    return new Suite(base.name() + "-" + model, List.of(new Case(model,
        batch > 0 ? batch : spec.defaultBatch(), Map.copyOf(options), size, steps, capacity,
        capacity && size != null)), base.methods(), base.fractions(), base.resolution(),
        base.rounds(), base.probedSizes());
  }

  /**
   * The command line that runs {@code s}, as the result files record it: a named suite's own, or
   * for a suite over one model ({@link #forModel}) the base suite with that model's
   * {@code --model}, {@code --batch} and options.
   */
  static String command(Suite s) {
    if (s.cases().size() == 1) {
      Case c = s.cases().get(0);
      String suffix = "-" + c.model();
      if (s.name().endsWith(suffix)) {
        StringBuilder b = new StringBuilder("./lms4j bench --suite ")
            .append(s.name(), 0, s.name().length() - suffix.length())
            .append(" --model ").append(c.model()).append(" --batch ").append(c.batch());
        new java.util.TreeMap<>(c.options()).forEach((k, v) ->
            b.append(" -o ").append(k).append('=').append(v));
        return b.toString();
      }
    }
    return "./lms4j bench --suite " + s.name();
  }

  /** Runs a suite, prints progress and tables to {@code out}, writes JSON and Markdown. */
  public static ObjectNode run(Suite s, Path outDir, PrintStream out) throws IOException {
    Files.createDirectories(outDir);
    ObjectNode root = JSON.createObjectNode();
    root.put("schema", BenchContract.SCHEMA).put("suite", s.name())
        .put("machine", Machine.describe())
        .put("command", command(s));
    ArrayNode models = root.putArray("models");
    long t0 = System.nanoTime();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      for (Case c : s.cases()) {
        models.add(new CaseRun(s, c, out, pool).run());
      }
    } finally {
      pool.shutdownNow();
    }
    ArrayNode planning = root.putArray("planning");
    // planning time at 10k and 100k ops belongs to the benchmark; the smoke suite only checks
    // that the planning section is produced, on a 1k-op graph
    for (int layers : s.name().equals("smoke") ? new int[] {200} : new int[] {2_000, 20_000}) {
      DataflowGraph g = SyntheticGraphs.trainingChain(layers, 1 << 20, 64 << 10);
      ObjectNode p = planningTime(g);
      planning.add(p);
      out.printf(Locale.ROOT, "planning on a synthetic graph of %d ops: %s%n", g.size(), p);
    }
    root.put("wall_seconds", (System.nanoTime() - t0) / 1e9);
    BenchContract.addResults(root);
    Path json = outDir.resolve("models-" + s.name() + ".json");
    Files.writeString(json, JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    StringBuilder md = new StringBuilder(ModelBenchMarkdown.of(root));
    List<Path> plots = BenchPlots.write(root, outDir, "models-" + s.name());
    if (!plots.isEmpty()) {
      md.append("\n## Pictures\n\n");
    }
    for (Path f : plots) {
      out.println("Plot: " + f);
      md.append("![").append(f.getFileName()).append("](").append(f.getFileName())
          .append(")\n\n");
    }
    Files.writeString(outDir.resolve("models-" + s.name() + ".md"), md.toString());
    out.println("Results: " + json);
    LOG.info("bench done: {}", json);
    return root;
  }

  /** A plan of one method at one budget: the graph to run, or why there is none. */
  record Planned(TrainingGraph graph, LmsResult lms, String noPlan, CostModel costModel) {
    boolean hasPlan() {
      return noPlan == null;
    }
  }

  /** The measurements of one case. */
  private static final class CaseRun {
    private final Suite s;
    private final Case c;
    private final PrintStream out;
    private final ExecutorService pool;
    private final ModelSpec spec;
    private final Map<Method, List<double[]>> throughput = new EnumMap<>(Method.class);

    CaseRun(Suite s, Case c, PrintStream out, ExecutorService pool) {
      this.s = s;
      this.c = c;
      this.out = out;
      this.pool = pool;
      this.spec = ModelZoo.getOrThrow(c.model());
    }

    private void say(String fmt, Object... args) {
      synchronized (out) {
        out.printf(Locale.ROOT, fmt + "%n", args);
      }
    }

    TrainingGraph build(int batch, Map<String, String> extra) {
      Map<String, String> o = new LinkedHashMap<>(c.options());
      o.putAll(extra);
      return spec.build(batch, o);
    }

    static DataflowGraph model(TrainingGraph tg) {
      return GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(), -1,
          GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
    }

    Planned plan(TrainingGraph tg, Method m, long budget) {
      if (!m.isLms()) {
        return new Planned(tg, null, null, null);
      }
      Lms lms = Lms.builder().budget(budget).mode(m.mode).build();
      if (m.probe) {
        Probe.Outcome o = Probe.closeLoop(tg, lms,
            Probe.Options.of(budget, lms));
        if (!o.trains()) {
          return new Planned(null, null, "probe " + o.verdict().name()
              .toLowerCase(Locale.ROOT) + ": " + o.message(), null);
        }
        return new Planned(new TrainingGraph(o.graphDef(), tg.manifest()), o.result(), null,
            lms.costModel());
      }
      try {
        LmsResult lr = lms.rewrite(tg);
        // the cost model the planner used: with the active swap path's bandwidth
        return new Planned(new TrainingGraph(lr.graphDef(), tg.manifest()), lr, null,
            lms.costModel());
      } catch (PlanningException e) {
        return new Planned(null, null, e.getMessage(), null);
      }
    }

    RunResult runOnce(Planned p, Method m, long budget, int steps) throws IOException {
      BudgetedRunner.Options o = new BudgetedRunner.Options(budget, steps, 42, true, m.memOpt,
          Duration.ofMinutes(10));
      return BudgetedRunner.run(p.graph(), o);
    }

    boolean fits(TrainingGraph tg, Method m, long budget, String what) throws IOException {
      return fits(tg, m, budget, what, null);
    }

    /** As above; a fitting run's samples per second at {@code x} go to {@code points}. */
    boolean fits(TrainingGraph tg, Method m, long budget, String what, int x,
        Map<Method, List<double[]>> points) throws IOException {
      return fits(tg, m, budget, what, r -> {
        synchronized (points) {
          points.computeIfAbsent(m, k -> new ArrayList<>())
              .add(new double[] {x, tg.manifest().batchSize() * 1000.0 / r.medianMs()});
        }
      });
    }

    private boolean fits(TrainingGraph tg, Method m, long budget, String what,
        java.util.function.Consumer<RunResult> onFit) throws IOException {
      Planned p = plan(tg, m, budget);
      if (!p.hasPlan()) {
        say("  %-16s %s at %d MiB: no plan", m.label, what, budget >> 20);
        return false;
      }
      RunResult r = runOnce(p, m, budget, 3);
      say("  %-16s %s at %d MiB: %s", m.label, what, budget >> 20,
          r.fits() ? "fits" : r.oom() ? "OOM" : "failed: " + r.error());
      if (r.fits() && onFit != null) {
        onFit.accept(r);
      }
      return r.fits();
    }

    ObjectNode run() throws IOException {
      ObjectNode node = JSON.createObjectNode();
      node.put("model", c.model()).put("batch", c.batch()).put("options", c.options().toString());
      say("== %s (batch %d, %s) ==", c.model(), c.batch(), c.options());
      TrainingGraph tg = build(c.batch(), Map.of());
      DataflowGraph model = model(tg);
      long floor = LowerBound.of(model);
      RunResult free = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, c.steps()));
      if (!free.fits()) {
        throw new IOException("the unbudgeted run of " + c.model() + " failed: " + free.error());
      }
      long peakMib = free.peakBytes() >> 20;
      node.put("ops", model.size()).put("floor_bytes", floor)
          .put("unbudgeted_peak_bytes", free.peakBytes())
          .put("unbudgeted_ms_per_step", free.medianMs());
      say("unbudgeted: %.0f ms/step, measured peak %d MiB; floor (resident + largest op) %d MiB",
          free.medianMs(), peakMib, floor >> 20);

      // 1. the smallest budget of each method
      Bisection.Edge noLms = smallestMib(tg, Method.NONE, floor >> 20, peakMib + 64);
      long noLmsMib = noLms.fits();
      say("smallest budget without LMS: %d MiB", noLmsMib);
      Map<Method, Long> minMib = new EnumMap<>(Method.class);
      Map<Method, Bisection.Edge> edges = new EnumMap<>(Method.class);
      edges.put(Method.NONE, noLms);
      List<Future<Bisection.Edge>> futures = new ArrayList<>();
      List<Method> others = s.methods().stream().filter(m -> m != Method.NONE).toList();
      for (Method m : others) {
        long hi = m.isLms() ? noLmsMib : peakMib + 64;
        futures.add(pool.submit(() -> smallestMib(tg, m, floor >> 20, hi)));
      }
      for (int i = 0; i < others.size(); i++) {
        edges.put(others.get(i), get(futures.get(i)));
      }
      edges.forEach((m, e) -> minMib.put(m, e.fits()));
      ArrayNode methods = node.putArray("methods");
      Map<Method, ObjectNode> rows = new EnumMap<>(Method.class);
      for (Method m : s.methods()) {
        long mib = minMib.get(m);
        ObjectNode row = methods.addObject();
        row.put("method", m.label).put("min_budget_mib", mib)
            .put("min_budget_ratio", mib > 0 ? mib / (double) noLmsMib : Double.NaN);
        rows.put(m, row);
        say("smallest budget %-16s %s", m.label,
            mib > 0 ? String.format(Locale.ROOT, "%d MiB (%.2f of no-LMS)", mib,
                mib / (double) noLmsMib) : "none found");
      }

      // 2. step time at fractions of the no-LMS budget, side by side with unbudgeted runs
      for (double f : s.fractions()) {
        long budget = (long) (noLmsMib * f) << 20;
        String key = String.format(Locale.ROOT, "%.2f", f);
        say("-- at %s of the no-LMS budget (%d MiB) --", key, budget >> 20);
        List<Method> runnable = new ArrayList<>();
        Map<Method, Planned> plans = new EnumMap<>(Method.class);
        for (Method m : s.methods()) {
          long mm = minMib.get(m);
          ObjectNode at = rows.get(m).putObject("at_" + key);
          at.put("budget_mib", budget >> 20);
          // the bisection's step is coarse: a budget between its last failing probe and the
          // smallest budget that trained was never probed, so it is planned and run here
          // (not for no-LMS: its smallest budget is the reference the fractions are of)
          if (mm < 0 || (mm << 20) > budget
              && (m == Method.NONE || !edges.get(m).unknown(budget >> 20))) {
            at.put("fits", false).put("why", mm < 0 ? "no budget found" : "below its smallest "
                + "budget (" + mm + " MiB)");
            continue;
          }
          Planned p = plan(tg, m, budget);
          if (!p.hasPlan()) {
            at.put("fits", false).put("why", "no plan: " + p.noPlan());
            continue;
          }
          plans.put(m, p);
          runnable.add(m);
          if (p.lms() != null) {
            LmsResult lr = p.lms();
            double predicted = PlanCosts.stepMs(p.costModel(), model, lr.plan(), lr.recompute());
            at.put("planning_ms", lr.planningMs())
                .put("predicted_peak_bytes", lr.predictedPeakAfter())
                .put("predicted_step_ratio", predicted / p.costModel().computeMs(model))
                .put("swapped_bytes", lr.plan().swapOutBytes())
                .put("swap_outs", lr.plan().swapOuts().size())
                .put("recomputed_ops", lr.recompute().clonedOps())
                .put("recomputed_bytes", lr.recompute().bytes());
          }
        }
        if (runnable.isEmpty()) {
          say("  no method has a plan at this budget");
          continue;
        }
        // rounds of [each method once, then one unbudgeted run], the method order rotated
        // each round; ratio = the method's time over the faster of the unbudgeted runs just
        // before and after its round; a method that fails once is not run again
        List<RunResult> unbudgeted = new ArrayList<>();
        unbudgeted.add(BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, c.steps())));
        Map<Method, List<RunResult>> results = new EnumMap<>(Method.class);
        Map<Method, List<Double>> ratios = new EnumMap<>(Method.class);
        Map<Method, RunResult> failed = new EnumMap<>(Method.class);
        for (int round = 0; round < s.rounds(); round++) {
          Map<Method, RunResult> now = new EnumMap<>(Method.class);
          for (int i = 0; i < runnable.size(); i++) {
            Method m = runnable.get((i + round) % runnable.size());
            if (!failed.containsKey(m)) {
              now.put(m, runOnce(plans.get(m), m, budget, c.steps()));
            }
          }
          unbudgeted.add(BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, c.steps())));
          double base = Math.min(unbudgeted.get(round).medianMs(), unbudgeted.get(round + 1).medianMs());
          now.forEach((m, r) -> {
            if (r.fits()) {
              results.computeIfAbsent(m, k -> new ArrayList<>()).add(r);
              ratios.computeIfAbsent(m, k -> new ArrayList<>()).add(r.medianMs() / base);
            } else {
              failed.put(m, r);
            }
          });
        }
        double base = unbudgeted.stream().mapToDouble(RunResult::medianMs).min().orElseThrow();
        for (Method m : runnable) {
          ObjectNode at = (ObjectNode) rows.get(m).get("at_" + key);
          RunResult bad = failed.get(m);
          at.put("fits", bad == null).put("unbudgeted_ms_per_step", base);
          if (bad == null) {
            double ratio = median(ratios.get(m));
            double ms = median(results.get(m).stream().map(RunResult::medianMs).toList());
            long peak = results.get(m).stream().mapToLong(RunResult::peakBytes).max().orElse(-1);
            at.put("ms_per_step", ms).put("step_ratio", ratio)
                .put("step_ratio_min", ratios.get(m).stream().mapToDouble(d -> d).min().orElse(0))
                .put("step_ratio_max", ratios.get(m).stream().mapToDouble(d -> d).max().orElse(0))
                .put("rounds", ratios.get(m).size()).put("measured_peak_bytes", peak);
            if (budget >> 20 < minMib.get(m)) {
              // trained below the bisection's answer (in the gap it never probed)
              minMib.put(m, budget >> 20);
              rows.get(m).put("min_budget_mib", budget >> 20)
                  .put("min_budget_ratio", (budget >> 20) / (double) noLmsMib)
                  .put("min_budget_from", "the run at " + key);
              say("  %-16s smallest budget now %d MiB (trained at %s)", m.label, budget >> 20,
                  key);
            }
            say("  %-16s %.0f ms/step = %.2fx unbudgeted (rounds %s); measured peak %d MiB%s",
                m.label, ms, ratio, ratios.get(m).stream()
                    .map(d -> String.format(Locale.ROOT, "%.2f", d)).toList(), peak >> 20,
                at.has("predicted_peak_bytes") ? String.format(Locale.ROOT,
                    ", predicted %d MiB, predicted ratio %.2fx",
                    at.get("predicted_peak_bytes").asLong() >> 20,
                    at.get("predicted_step_ratio").asDouble()) : "");
          } else {
            at.put("why", bad.oom() ? "OOM" : bad.error());
            say("  %-16s %s", m.label, bad.oom() ? "OOM" : "failed: " + bad.error());
          }
        }
      }

      // 3. capacity: the largest batch at the no-LMS smallest budget of the base batch
      // a 5% margin over the bisected no-LMS budget: at the exact edge, run-to-run variation of
      // the measured peak makes the base batch itself fail now and then
      long fixedMib = Math.round(noLmsMib * 1.05);
      // capacity and input size are searched for no-LMS and the methods whose smallest budget
      // is at most 90% of no-LMS's; the others cannot train much more than no-LMS at that
      // budget, and their searches would take a third of the suite's time. auto+probe's search
      // is slower (each batch that runs out of memory costs it a probe per try, and its refusal
      // a checked figure) but it is what run and train reach: searched where the suite says
      List<Method> sizeMethods = new ArrayList<>();
      ArrayNode skipped = JSON.createArrayNode();
      for (Method m : s.methods()) {
        long mm = minMib.get(m);
        if (m == Method.NONE
            || ((!m.probe || s.probedSizes()) && mm > 0 && mm <= 0.9 * noLmsMib)) {
          sizeMethods.add(m);
        } else {
          skipped.add(m.label);
        }
      }
      if (c.capacity()) {
        ObjectNode cap = node.putObject("capacity");
        cap.put("budget_mib", fixedMib).put("base_batch", c.batch());
        cap.set("skipped_methods", skipped.deepCopy());
        largestPerMethod(cap, sizeMethods, "batch", c.batch(), fixedMib << 20,
            b -> build(b, Map.of()), "physical_limit_batch", "largest_batch",
            "no_lms_largest_batch", throughput);
        ArrayNode curve = cap.putArray("throughput");
        synchronized (throughput) {
          throughput.forEach((m, pts) -> pts.forEach(pt -> curve.addObject()
              .put("method", m.label).put("batch", (int) pt[0]).put("samples_per_s", pt[1])));
        }
      }

      // 4. the largest input size at the base batch
      if (c.inputSize() && c.sizeOption() != null) {
        String opt = c.sizeOption();
        int size0 = Integer.parseInt(c.options().getOrDefault(opt,
            spec.defaultOptions().get(opt)));
        ObjectNode sz = node.putObject("input_size");
        sz.put("option", opt).put("budget_mib", fixedMib).put("base", size0);
        sz.set("skipped_methods", skipped.deepCopy());
        largestPerMethod(sz, sizeMethods, opt, size0, fixedMib << 20,
            v -> build(c.batch(), Map.of(opt, Integer.toString(v))), "physical_limit", "largest",
            "no_lms_largest", null);
      }
      return node;
    }

    /**
     * For each method, the largest value of a size (batch, image side, ...) that trains at
     * {@code budget}, searched up to the physical limit (resident bytes plus the largest op fit);
     * rows go to {@code node.methods} with their ratio to no-LMS and share of the limit.
     */
    void largestPerMethod(ObjectNode node, List<Method> methods, String what, int base,
        long budget,
        java.util.function.IntFunction<TrainingGraph> graphAt, String physField,
        String largestField, String refField, Map<Method, List<double[]>> points)
        throws IOException {
      int phys = physicalLimit(base, budget, v -> LowerBound.of(model(graphAt.apply(v))));
      node.put(physField, phys);
      say("-- largest %s at %d MiB: physical limit %d --", what, budget >> 20, phys);
      Map<Method, Future<Integer>> fs = new EnumMap<>(Method.class);
      for (Method m : methods) {
        fs.put(m, pool.submit(() -> largest(base, phys, v -> points == null
            ? fits(graphAt.apply(v), m, budget, what + " " + v)
            : fits(graphAt.apply(v), m, budget, what + " " + v, v, points))));
      }
      Map<Method, Integer> largest = new EnumMap<>(Method.class);
      for (Method m : methods) {
        largest.put(m, get(fs.get(m)));
      }
      int ref = largest.getOrDefault(Method.NONE, 0) > 0 ? largest.get(Method.NONE) : base;
      node.put(refField, ref);
      ArrayNode rows = node.putArray("methods");
      for (Method m : methods) {
        int v = largest.get(m);
        rows.addObject().put("method", m.label).put(largestField, v)
            .put("ratio_to_no_lms", v / (double) ref)
            .put("share_of_physical_limit", v / (double) phys);
        say("largest %s %-16s %d (%.2fx no-LMS, %.0f%% of the physical limit)", what, m.label, v,
            v / (double) ref, 100.0 * v / phys);
      }
    }

    /**
     * Where the bisection for {@code m} over (lo, hi] stopped: the smallest MiB that trained (-1
     * when hi did not) and the last that failed. An lms4j mode's search starts at no LMS's
     * smallest budget, where a mode that finds LMS not necessary runs the very graph that
     * trained there once, at its edge: hi is probed twice before the mode is said to find none.
     */
    Bisection.Edge smallestMib(TrainingGraph tg, Method m, long lo, long hi) throws IOException {
      long step = Math.max(2, (long) (hi * s.resolution()));
      return Bisection.search(Math.max(1, lo - 1), hi, step, m.isLms() ? 2 : 1,
          mib -> fits(tg, m, mib << 20, "budget"));
    }

    /** The median of {@code xs} (the mean of the middle two when even). */
    static double median(List<Double> xs) {
      double[] v = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
      int n = v.length;
      return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }

    /** The largest value in [lo, hi] that fits, 0 when lo does not (monotone assumed). */
    int largest(int lo, int hi, IntProbe p) throws IOException {
      if (!p.fits(lo)) {
        return 0;
      }
      int good = lo;
      int bad = hi + 1;
      while (bad - good > Math.max(1, (int) (good * s.resolution()))) {
        int mid = good + (bad - good) / 2;
        if (p.fits(mid)) {
          good = mid;
        } else {
          bad = mid;
        }
      }
      return good;
    }

    /**
     * The largest value whose floor (resident bytes + largest single-op working set) fits the
     * budget, searched from {@code base} by doubling then bisection, at most 64x base.
     */
    int physicalLimit(int base, long budget, FloorFn floorOf) {
      int good = base;
      int bad = -1;
      int cap = base * 64;
      while (bad < 0 && good < cap) {
        int next = Math.min(cap, good * 2);
        if (floorOf.floor(next) <= budget) {
          good = next;
        } else {
          bad = next;
        }
      }
      if (bad < 0) {
        return good;
      }
      while (bad - good > Math.max(1, (int) (good * s.resolution() / 2))) {
        int mid = good + (bad - good) / 2;
        if (floorOf.floor(mid) <= budget) {
          good = mid;
        } else {
          bad = mid;
        }
      }
      return good;
    }
  }

  interface IntProbe {
    boolean fits(int v) throws IOException;
  }

  interface FloorFn {
    long floor(int v);
  }

  private static <T> T get(Future<T> f) throws IOException {
    try {
      return f.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof IOException io) {
        throw io;
      }
      if (e.getCause() instanceof UncheckedIOException u) {
        throw u.getCause();
      }
      throw new IOException(e.getCause());
    }
  }

  /** Planning time of the planners on a synthetic graph (no TensorFlow involved). */
  static ObjectNode planningTime(DataflowGraph g) {
    ObjectNode n = JSON.createObjectNode();
    long peak = SwapAutoTuner.simulatePeak(g, SwapPlan.empty(dev.lms4j.core.plan.SwapParams
        .defaults()));
    n.put("ops", g.size()).put("peak_bytes", peak);
    long t0 = System.nanoTime();
    try {
      SwapAutoTuner.tune(g, dev.lms4j.core.plan.SwapParams.defaults(), peak / 2, 0.9);
      n.put("tflms_ms", (System.nanoTime() - t0) / 1e6);
    } catch (PlanningException e) {
      n.put("tflms_error", e.getMessage()).put("tflms_failed_after_ms",
          (System.nanoTime() - t0) / 1e6);
    }
    t0 = System.nanoTime();
    try {
      dev.lms4j.core.plan.RecomputePlanner.underBudget(g, peak * 3 / 4, 0.9);
      n.put("remat_ms", (System.nanoTime() - t0) / 1e6);
    } catch (PlanningException e) {
      n.put("remat_error", e.getMessage()).put("remat_failed_after_ms",
          (System.nanoTime() - t0) / 1e6);
    }
    timed(n, "hybrid", () -> dev.lms4j.core.plan.HybridPlanner.plan(g,
        dev.lms4j.core.plan.HybridPlanner.Options.of(peak / 2).withMemRatio(0.9)));
    timed(n, "remat_xla", () -> dev.lms4j.core.plan.Rematerializer.bestEffort(g,
        peak * 3 / 4, dev.lms4j.core.plan.Rematerializer.Options.defaults()));
    return n;
  }

  /** Times one planner call into {@code n} ({@code name_ms}, or its error and time). */
  private static void timed(ObjectNode n, String name, Runnable r) {
    long t0 = System.nanoTime();
    try {
      r.run();
      n.put(name + "_ms", (System.nanoTime() - t0) / 1e6);
    } catch (PlanningException e) {
      n.put(name + "_error", e.getMessage()).put(name + "_failed_after_ms",
          (System.nanoTime() - t0) / 1e6);
    }
  }
}
