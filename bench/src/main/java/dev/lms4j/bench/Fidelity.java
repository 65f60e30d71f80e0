package dev.lms4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.InitNeeds;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.ScratchTrace;
import dev.lms4j.tf.StepOrder;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.corpus.Corpus;
import dev.lms4j.train.models.ModelZoo;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.RewriterConfig;

/**
 * {@code lms4j bench --suite fidelity}: how well the memory model predicts what TensorFlow
 * really needs. It <b>runs every graph</b>: one traced step in a worker JVM (BFC allocator on),
 * then a bisection of the smallest budget that trains (init and two steps per probe, each in
 * its own budgeted worker).
 *
 * <p>Per graph it prints the ops side by side, sorted by the gap: the simulator's bytes in use
 * while each op runs (levelled schedule; the model before scratch was modelled, with estimated
 * scratch, and with the trace's measured scratch) against the traced bytes in use while the op
 * ran (the allocator's bytes in use after the op before it plus the op's own high-water mark),
 * and the op's traced scratch ({@link ScratchTrace}). Then the totals: predicted peaks under the
 * three models against the traced peaks and the smallest budget that really trains, without LMS
 * and with one planner ({@code auto}) planned at one budget, the rewritten graph's own smallest
 * budget bisected as well. At the no-LMS minimum one more step is traced under that budget and
 * compared op by op with the allocator model under the same limit ({@link #compareAtBudget}):
 * an unbudgeted trace grows its regions without a cap, so its chunks are not the ones that
 * decide whether a budget fits.
 *
 * <pre>{@code
 * ObjectNode r = Fidelity.run(Fidelity.defaults(), Path.of("docs/bench"), System.out);
 * }</pre>
 */
public final class Fidelity {
  private static final Logger LOG = LoggerFactory.getLogger(Fidelity.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int STEPS = 2;
  private static final int TOP = 12;
  /** The planner's budget: the first of these fractions of the no-LMS minimum it plans for. */
  static final double[] PLAN_FRACTIONS = {0.6, 0.7, 0.8};
  /** Bisection step as a fraction of the upper bound. */
  static final double RESOLUTION = 0.03;

  private Fidelity() {}

  /**
   * A graph to measure.
   *
   * @param label how the tables name it
   * @param build builds it
   */
  /**
   * One graph: its label in the tables, how it is built, and the {@code bench} options that
   * select it ({@code --model M --batch B}, {@code --families F --size S}).
   */
  public record Case(String label, GraphSource build, String flags) {}

  /**
   * The command a graph suite's result files record: the suite's own where it measured its
   * defaults, else followed by the graphs it was given ({@code --model} / {@code --families}).
   */
  static String command(String suite, List<Case> cases, List<Case> defaults) {
    String c = "./lms4j bench --suite " + suite;
    if (cases.stream().map(Case::label).toList()
        .equals(defaults.stream().map(Case::label).toList())) {
      return c;
    }
    // the command line takes one --model and one list of families at one --size
    StringBuilder b = new StringBuilder(c);
    List<String> families = new ArrayList<>();
    String size = null;
    for (Case k : cases) {
      if (k.flags().startsWith("--families ")) {
        String[] f = k.flags().split(" ");
        families.add(f[1]);
        size = f[3];
      } else {
        b.append(' ').append(k.flags());
      }
    }
    if (!families.isEmpty()) {
      b.append(" --families ").append(String.join(",", families));
      if (!size.equals("bench")) {
        b.append(" --size ").append(size);
      }
    }
    return b.toString();
  }

  /** Builds a training graph. */
  public interface GraphSource {
    /** The graph. */
    TrainingGraph get() throws IOException;
  }

  /** A zoo model at a batch size. */
  public static Case zoo(String model, int batch) {
    return zoo(model, batch, Map.of());
  }

  /** A zoo model at a batch size with model options ({@code -o key=value}). */
  public static Case zoo(String model, int batch, Map<String, String> options) {
    String opts = options.isEmpty() ? "" : " " + new java.util.TreeMap<>(options);
    StringBuilder flags = new StringBuilder("--model " + model + " --batch " + batch);
    new java.util.TreeMap<>(options).forEach((k, v) -> flags.append(" -o ").append(k)
        .append('=').append(v));
    return new Case(model + " b" + batch + opts, () -> ModelZoo.getOrThrow(model).build(batch,
        options), flags.toString());
  }

  /** A corpus family. */
  public static Case corpus(String family, Corpus.Size size) {
    String sz = size.name().toLowerCase(Locale.ROOT);
    return new Case(family + " (" + sz + ")", () -> Corpus.getOrThrow(family).build(size, 42),
        "--families " + family + " --size " + sz);
  }

  /** The default set: a handful of zoo models and corpus families. */
  public static List<Case> defaults() {
    return List.of(zoo("resnet", 32), zoo("lenet", 100), zoo("gpt2", 4),
        corpus("resnet-resource", Corpus.Size.BENCH), corpus("unet", Corpus.Size.BENCH),
        corpus("encoder", Corpus.Size.BENCH));
  }

  /**
   * Measures the cases and writes {@code fidelity.json} and {@code fidelity.md} under
   * {@code outDir} (after every case, so a stopped run keeps what it measured).
   */
  public static ObjectNode run(List<Case> cases, Path outDir, PrintStream out)
      throws IOException {
    Files.createDirectories(outDir);
    ObjectNode root = JSON.createObjectNode();
    root.put("schema", "lms4j-bench-fidelity/1").put("suite", "fidelity")
        .put("machine", Machine.describe()).put("command", command("fidelity", cases, defaults()))
        .put("steps_per_probe", STEPS).put("resolution", RESOLUTION)
        .put("plan_fractions", java.util.Arrays.toString(PLAN_FRACTIONS));
    ArrayNode rows = root.putArray("graphs");
    long t0 = System.nanoTime();
    for (Case c : cases) {
      rows.add(measure(c, out));
      root.put("wall_seconds", (System.nanoTime() - t0) / 1e9);
      write(root, outDir);
    }
    out.println(markdown(root));
    return root;
  }

  private static void write(ObjectNode root, Path outDir) throws IOException {
    Files.writeString(outDir.resolve("fidelity.json"),
        JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    Files.writeString(outDir.resolve("fidelity.md"), markdown(root));
  }

  /** One traced step of {@code tg} in a worker JVM without a budget. */
  private static ScratchTrace traceUnbudgeted(TrainingGraph tg) throws IOException {
    Path dir = Files.createTempDirectory("lms4j-fidelity");
    try {
      tg.write(dir.resolve("g.pb"), dir.resolve("m.json"));
      return TraceWorker.trace(dir.resolve("g.pb"), dir.resolve("m.json"),
          BudgetedRunner.UNBUDGETED_MIB);
    } finally {
      deleteTree(dir);
    }
  }

  /** One case: trace, per-op comparison, bisections. */
  static ObjectNode measure(Case c, PrintStream out) throws IOException {
    ObjectNode node = JSON.createObjectNode().put("graph", c.label());
    TrainingGraph tg = c.build().get();
    DataflowGraph estimated = model(tg);
    ScratchTrace trace = traceUnbudgeted(tg);
    Comparison cmp = compare(estimated, trace);
    out.println(cmp.table(c.label(), TOP));
    node.put("ops", estimated.size())
        .put("traced_peak_bytes", trace.peakBytesInUse())
        .put("traced_peak_with_scratch_bytes", trace.peakBytesWithScratch())
        .put("largest_traced_scratch_bytes", cmp.largestScratch)
        .put("largest_traced_scratch_op", cmp.largestScratchOp);
    ObjectNode none = node.putObject("no_lms");
    StepOrder given = StepOrder.given(tg.graphDef(), tg.manifest().feedShapes(),
        tg.manifest().runOps());
    none.put("predicted_old_bytes", cmp.peakOld).put("predicted_new_bytes", cmp.peakNew)
        .put("predicted_measured_scratch_bytes", cmp.peakMeasured)
        .put("predicted_measured_scratch_traced_order_bytes", cmp.peakMeasuredTracedOrder)
        .put("allocator_bytes", allocatorMin(estimated, null, null, given))
        .put("allocator_measured_scratch_bytes",
            allocatorMin(estimated.withScratch(trace.scratchByOp()), null, null, given));
    predictInit(none, tg.graphDef(), tg.manifest());
    ArrayNode top = node.putArray("top_gaps");
    for (Row r : cmp.rows.subList(0, Math.min(TOP, cmp.rows.size()))) {
      top.addObject().put("op", r.op).put("type", r.type).put("predicted_old", r.old)
          .put("predicted_new", r.est).put("predicted_measured", r.measured)
          .put("traced", r.traced).put("traced_scratch", r.scratch)
          .put("estimated_scratch", r.estScratch).put("predicted_allocator", r.alloc);
    }
    long hi = Math.max(cmp.peakNew, trace.peakBytesWithScratch());
    long real = smallest(c.label() + " no-lms", tg, hi, out);
    none.put("min_budget_mib", real);
    if (real > 0) {
      atBudget(none.putObject("at_min"), estimated, tg, real, out, c.label());
    }
    say(out, "%s no LMS: predicted old %.1f / new %.1f / measured-scratch %.1f MiB; "
        + "smallest budget %d MiB", c.label(), mib(cmp.peakOld), mib(cmp.peakNew),
        mib(cmp.peakMeasured), real);
    if (real > 0) {
      ObjectNode plan = node.putObject("auto");
      LmsResult lr = null;
      long budget = 0;
      for (double f : PLAN_FRACTIONS) { // the first fraction the planner accepts
        budget = (long) (real * f) << 20;
        try {
          lr = Lms.builder().budget(budget).mode(LmsMode.AUTO).build().rewrite(tg);
          break;
        } catch (PlanningException e) {
          plan.put("error", "no plan at " + Math.round(f * 100) + "% of the no-LMS minimum: "
              + firstLine(e.getMessage()));
          say(out, "%s auto at %.0f MiB: no plan", c.label(), mib(budget));
        }
      }
      plan.put("budget_bytes", budget);
      if (lr != null) {
        plan.remove("error");
        TrainingGraph rw = new TrainingGraph(lr.graphDef(), tg.manifest());
        predictPlan(plan, lr, tg.manifest(), trace);
        long pOld = plan.path("predicted_old_bytes").asLong();
        long pNew = plan.path("predicted_new_bytes").asLong();
        long pMeasured = plan.path("predicted_measured_scratch_bytes").asLong();
        long realPlan = smallest(c.label() + " auto", rw, Math.max(pNew, budget), out);
        plan.put("min_budget_mib", realPlan);
        say(out, "%s auto at %.0f MiB (%s): predicted old %.1f / new %.1f / measured-scratch "
            + "%.1f MiB; smallest budget %d MiB", c.label(), mib(budget), plannerName(lr),
            mib(pOld), mib(pNew), mib(pMeasured), realPlan);
      }
    }
    return node;
  }

  /**
   * One more traced step of {@code tg}, under {@code mib} (the smallest budget it trained at),
   * compared op by op with the allocator model in that step's order under the same limit
   * ({@link #compareAtBudget}); a trace that fails there (TensorFlow's order is not fixed, a
   * step at its smallest budget may not repeat) is recorded as such.
   */
  private static void atBudget(ObjectNode node, DataflowGraph estimated, TrainingGraph tg,
      long mib, PrintStream out, String label) throws IOException {
    node.put("budget_mib", mib);
    Path dir = Files.createTempDirectory("lms4j-fidelity");
    ScratchTrace t;
    try {
      tg.write(dir.resolve("g.pb"), dir.resolve("m.json"));
      t = TraceWorker.trace(dir.resolve("g.pb"), dir.resolve("m.json"), mib);
    } catch (IOException e) {
      node.put("error", firstLine(e.getMessage()));
      say(out, "%s traced at %d MiB: %s", label, mib, firstLine(e.getMessage()));
      return;
    } finally {
      deleteTree(dir);
    }
    AtBudget a = compareAtBudget(estimated, t, mib << 20);
    node.put("traced_peak_bytes", a.tracedPeak).put("allocator_peak_bytes", a.modelPeak)
        .put("ops_compared", a.rows.size()).put("median_abs_gap_bytes", a.medianAbsGap())
        .put("within_half_mib", a.within(1L << 19)).put("allocator_fits",
            a.modelFailedAt == null);
    if (a.modelFailedAt != null) {
      node.put("allocator_failed_at", a.modelFailedAt).put("ops_not_compared",
          a.opsNotCompared);
      say(out, "%s at %d MiB: the allocator model runs out of memory at %s, where TensorFlow "
          + "did not (%d ops from there not compared)", label, mib, a.modelFailedAt,
          a.opsNotCompared);
    }
    ArrayNode top = node.putArray("top_gaps");
    for (AtBudget.Row r : a.rows.subList(0, Math.min(TOP, a.rows.size()))) {
      top.addObject().put("op", r.op()).put("type", r.type()).put("allocator", r.alloc())
          .put("traced", r.traced());
    }
    say(out, "%s at %d MiB, TensorFlow's order: allocator model peak %.1f MiB, traced %.1f; "
        + "%d of %d ops within 0.5 MiB, median gap %.2f MiB", label, mib, mib(a.modelPeak),
        mib(a.tracedPeak), a.within(1L << 19), a.rows.size(), mib(a.medianAbsGap()));
  }

  /**
   * The allocator model against TensorFlow's allocator at one limit: {@code trace} is a step
   * run under {@code limit}; the model replays the graph in that step's order under the same
   * limit ({@link BfcReplay#inUseWhileRunning}). Compared per op that allocated (an op without
   * memory statistics only carries the bytes in use over, often from an op that ran beside
   * it), the traced figure computed as in {@link #compare} (the larger of the bytes in use
   * after the op and those before it plus its peak) but from the op's first record with memory
   * statistics, as its place in {@link ScratchTrace#orderOf} is its first; sorted by the largest
   * absolute gap. Where the model runs out of memory under the limit (TensorFlow did not: the
   * step was traced), the result names the op ({@link AtBudget#modelFailedAt}) and the ops from
   * there on are not compared.
   */
  static AtBudget compareAtBudget(DataflowGraph g, ScratchTrace trace, long limit) {
    int[] order = trace.orderOf(g);
    long[] alloc = BfcReplay.inUseWhileRunning(g, order, limit, BfcReplay.Layout.GRAPH_ORDER);
    Map<String, Long> traced = new HashMap<>();
    long before = 0;
    for (ScratchTrace.Node n : trace.nodes()) {
      if (n.peakBytes() > 0) {
        traced.putIfAbsent(n.name(), Math.max(n.bytesInUse(), before + n.peakBytes()));
      }
      before = n.bytesInUse();
    }
    AtBudget a = new AtBudget(trace.peakBytesInUse());
    for (int i = 0; i < order.length; i++) {
      a.modelPeak = Math.max(a.modelPeak, alloc[i]);
      Op op = g.op(order[i]);
      if (alloc[i] < 0 && a.modelFailedAt == null) {
        // the model ran out of memory where TensorFlow did not: from here on nothing compares
        a.modelFailedAt = op.name();
        a.opsNotCompared = order.length - i;
      }
      Long t = traced.get(op.name());
      if (t != null && alloc[i] >= 0) {
        a.rows.add(new AtBudget.Row(op.name(), op.type(), alloc[i], t));
      }
    }
    a.rows.sort(Comparator.comparingLong((AtBudget.Row r) -> Math.abs(r.gap())).reversed()
        .thenComparing(AtBudget.Row::op));
    return a;
  }

  /** {@link #compareAtBudget}'s result: rows sorted by the gap, and both peaks. */
  static final class AtBudget {
    /** One op: the model's chunks in use while it ran and the trace's bytes in use. */
    record Row(String op, String type, long alloc, long traced) {
      long gap() {
        return traced - alloc;
      }
    }

    final List<Row> rows = new ArrayList<>();
    final long tracedPeak;
    /** The model's peak over the ops it ran (up to {@link #modelFailedAt}, where it failed). */
    long modelPeak;
    /** The op where the model ran out of memory under the limit, or null where it fits. */
    String modelFailedAt;
    /** The ops from {@link #modelFailedAt} on, which no row compares. */
    int opsNotCompared;

    AtBudget(long tracedPeak) {
      this.tracedPeak = tracedPeak;
    }

    long medianAbsGap() {
      long[] g = rows.stream().mapToLong(r -> Math.abs(r.gap())).sorted().toArray();
      return g.length == 0 ? 0 : g[g.length / 2];
    }

    int within(long bytes) {
      return (int) rows.stream().filter(r -> Math.abs(r.gap()) <= bytes).count();
    }
  }

  /**
   * The planner that made {@code lr}'s plan, or "rewrites before planning" where they alone fit
   * (no plan was needed: the RNNs' running accumulations of gradient sums).
   */
  static String plannerName(LmsResult lr) {
    return lr.planner() != null ? lr.planner() : "rewrites before planning";
  }

  /**
   * The plan's predicted peaks under the three models: its own model of the rewritten graph
   * (the planner's graph with the plan applied, levelled schedule) with scratch estimated (what
   * the planner predicted), without scratch, and with the trace's.
   */
  static void predictPlan(ObjectNode plan, LmsResult lr, Manifest m, ScratchTrace trace) {
    DataflowGraph g = lr.model();
    StepOrder steps = stepOrder(lr, m);
    java.util.function.ToLongFunction<DataflowGraph> peak = lr.memoryPlan() == null
        ? Fidelity::levelledPeak : x -> lr.memoryPlan().simulatePeak(x);
    plan.put("planner", plannerName(lr)).put("planner_predicted_bytes", lr.predictedPeakAfter())
        .put("predicted_old_bytes", peak.applyAsLong(g.withoutScratch()))
        .put("predicted_new_bytes", peak.applyAsLong(g))
        .put("predicted_measured_scratch_bytes",
            peak.applyAsLong(g.withScratch(trace.scratchByOp())))
        .put("allocator_bytes", allocatorMin(g, lr.memoryPlan(), lr.initLayout(), steps))
        .put("allocator_measured_scratch_bytes",
            allocatorMin(g.withScratch(trace.scratchByOp()), lr.memoryPlan(), lr.initLayout(),
                steps));
    predictInit(plan, lr.graphDef(), m);
  }

  /**
   * What the init run of {@code gd} alone needs of the allocator model ({@link InitNeeds}), in
   * the best order and in the graph's own, where the manifest names an init op.
   */
  static void predictInit(ObjectNode row, org.tensorflow.proto.GraphDef gd, Manifest m) {
    BfcReplay.InitNeed need = InitNeeds.of(gd, m, -1,
        GraphImporter.DEFAULT_BACKWARD_SCOPE);
    if (need != null && need.bestMib() > 0) {
      row.put("predicted_init_bytes", need.bestMib() << 20)
          .put("predicted_init_graph_order_bytes", Math.max(0, need.graphOrderMib()) << 20);
    }
  }

  /**
   * As {@link #allocatorMin(DataflowGraph, dev.lms4j.core.plan.MemoryPlan)}, with the variables
   * created in {@code init}'s order (null: the graph's), as the rewritten graph creates them: a
   * plan whose init was reordered is replayed with that order, not the graph's (LeNet's plan
   * for 75 MiB needs 79 MiB with the graph's order and 70, as measured, with its own).
   */
  static long allocatorMin(DataflowGraph g, dev.lms4j.core.plan.MemoryPlan plan,
      LmsResult.InitLayout init) {
    return allocatorMin(g, plan, init, StepOrder.levelled());
  }

  /**
   * As above, with the step replayed in {@code steps}'s orders ({@link #stepOrder}: a rewritten
   * graph's serial order with its unchained ops run as TensorFlow may run them), the largest.
   */
  static long allocatorMin(DataflowGraph g, dev.lms4j.core.plan.MemoryPlan plan,
      LmsResult.InitLayout init, StepOrder steps) {
    DataflowGraph r = plan == null ? g : plan.applyTo(g);
    BfcReplay.Layout layout = BfcReplay.Layout.GRAPH_ORDER;
    if (init != null) {
      int[] last = init.last().stream().mapToInt(n -> r.opOrThrow(n).id()).toArray();
      layout = new BfcReplay.Layout(last, init.primerBytes(), init.primerFirst());
    }
    long mib = 0;
    for (int[] order : steps.orders(r)) {
      long m = BfcReplay.smallestMib(r, order, 64L << 10, layout);
      if (m < 0) {
        return 0;
      }
      mib = Math.max(mib, m);
    }
    return mib << 20;
  }

  /**
   * The order a step of {@code lr}'s graph runs in: a rewritten graph runs in lms4j's serial
   * order (the default of {@code Lms.builder()}, as the bench builds it), the graph as given in
   * TensorFlow's own ({@link StepOrder#given}).
   */
  static StepOrder stepOrder(LmsResult lr, Manifest m) {
    return lr.rewritten() ? StepOrder.serial(lr.graphDef(), m.feedShapes(), m.runOps())
        : StepOrder.given(lr.graphDef(), m.feedShapes(), m.runOps());
  }

  /**
   * The smallest budget under which the allocator model ({@link BfcReplay}: whole chunks,
   * region growth) fits a step of {@code g} with {@code plan} applied (null: as it is), on the
   * levelled schedule, in bytes (whole MiB); 0 when not under 64 GiB.
   */
  static long allocatorMin(DataflowGraph g, dev.lms4j.core.plan.MemoryPlan plan) {
    return allocatorMin(g, plan, null);
  }

  /**
   * Recomputes the planner rows' predictions of a result (a new trace per graph, the same
   * budget; the smallest budgets measured are kept), for a result written before a change of
   * how predictions are read.
   */
  static void repredict(ObjectNode root, List<Case> cases, PrintStream out) throws IOException {
    for (var gn : root.path("graphs")) {
      ObjectNode plan = (ObjectNode) gn.path("auto");
      if (!plan.has("min_budget_mib")) {
        continue;
      }
      Case c = cases.stream().filter(x -> x.label().equals(gn.path("graph").asText()))
          .findFirst().orElseThrow(() -> new IllegalArgumentException("unknown graph "
              + gn.path("graph").asText()));
      TrainingGraph tg = c.build().get();
      ScratchTrace trace = traceUnbudgeted(tg);
      String planner = plan.path("planner").asText();
      LmsResult lr = Lms.builder().budget(plan.path("budget_bytes").asLong())
          .mode(LmsMode.AUTO).build().rewrite(tg);
      predictPlan(plan, lr, tg.manifest(), trace);
      if (!plannerName(lr).equals(planner)) {
        plan.put("note", "planned again as " + plannerName(lr) + ", measured as " + planner);
      }
      say(out, "%s auto: old %.1f / new %.1f / measured-scratch %.1f MiB, real %d MiB",
          c.label(), mib(plan.path("predicted_old_bytes").asLong()),
          mib(plan.path("predicted_new_bytes").asLong()),
          mib(plan.path("predicted_measured_scratch_bytes").asLong()),
          plan.path("min_budget_mib").asLong());
    }
  }

  /** The graph model lms4j plans on (scratch estimated). */
  static DataflowGraph model(TrainingGraph tg) {
    return GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(), -1,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
  }

  static long levelledPeak(DataflowGraph g) {
    return MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes();
  }

  /** The smallest MiB at which {@code tg} trains, from about {@code guess} bytes. */
  private static long smallest(String label, TrainingGraph tg, long guess, PrintStream out)
      throws IOException {
    return smallest(guess, mib -> {
      boolean ok = fits(tg, mib);
      say(out, "  %s %d MiB: %s", label, mib, ok ? "trains" : "OOM");
      return ok;
    });
  }

  /**
   * The smallest MiB that {@code p} fits, from about {@code guess} bytes: a first bound of 1.3
   * times the guess + 16 MiB, doubled until it fits, then bisection to {@link #RESOLUTION} of
   * it. Nothing below the first bound is taken to fail unprobed: a small graph's need is a
   * fraction of it (GPT-2 b4 trains at 4 MiB, a quarter of its 20 MiB bound). Each budget is
   * probed once. -1 when nothing up to 16 GiB fits.
   */
  static long smallest(long guess, Bisection.Probe p) throws IOException {
    Map<Long, Boolean> seen = new HashMap<>();
    Bisection.Probe once = mib -> {
      Boolean known = seen.get(mib);
      if (known == null) {
        known = p.fits(mib);
        seen.put(mib, known);
      }
      return known;
    };
    long hi = (long) (guess * 1.3 / 1048576.0) + 16;
    long lo = 0;
    while (!once.fits(hi)) {
      if (hi >= 16_384) {
        return -1;
      }
      lo = hi;
      hi *= 2;
    }
    long step = Math.max(1, (long) (hi * RESOLUTION));
    return Bisection.smallest(lo, hi, step, once);
  }

  private static boolean fits(TrainingGraph tg, long mib) throws IOException {
    RunResult r = BudgetedRunner.run(tg, new BudgetedRunner.Options(mib << 20, STEPS, 42, true,
        RewriterConfig.MemOptType.DEFAULT_MEM_OPT, Duration.ofMinutes(5)));
    if (!r.fits() && !r.oom()) {
      LOG.warn("run at {} MiB failed: {}", mib, r.error());
    }
    return r.fits();
  }

  /** One op side by side. */
  record Row(String op, String type, long old, long est, long measured, long traced,
      long scratch, long estScratch, long alloc) {
    long gap() {
      return traced - est;
    }
  }

  /** The per-op comparison of a graph model with a trace. */
  static final class Comparison {
    final List<Row> rows = new ArrayList<>();
    long peakOld;
    long peakNew;
    long peakMeasured;
    long peakMeasuredTracedOrder;
    long tracedPeak;
    long tracedWithScratch;
    long largestScratch;
    String largestScratchOp = "";

    String table(String label, int top) {
      StringBuilder sb = new StringBuilder();
      sb.append(String.format(Locale.ROOT, "== %s: predicted peak old %.1f MiB, with estimated "
          + "scratch %.1f MiB, with traced scratch %.1f MiB; traced peak %.1f MiB, with scratch "
          + "%.1f MiB; largest scratch %.1f MiB (%s); with traced scratch in TensorFlow's order "
          + "%.1f MiB%n", label, mib(peakOld), mib(peakNew),
          mib(peakMeasured), mib(tracedPeak), mib(tracedWithScratch), mib(largestScratch),
          largestScratchOp, mib(peakMeasuredTracedOrder)));
      sb.append(String.format(Locale.ROOT, "%-44s %-22s %9s %9s %9s %9s %9s %9s %9s %9s%n",
          "op", "type", "old", "est", "measured", "alloc", "traced", "gap", "scratch",
          "est.scr"));
      for (Row r : rows.subList(0, Math.min(top, rows.size()))) {
        sb.append(String.format(Locale.ROOT,
            "%-44s %-22s %9.1f %9.1f %9.1f %9.1f %9.1f %+9.1f %9.1f %9.1f%n", cut(r.op, 44),
            cut(r.type, 22), mib(r.old), mib(r.est), mib(r.measured), mib(r.alloc),
            mib(r.traced), mib(r.gap()), mib(r.scratch), mib(r.estScratch)));
      }
      return sb.toString();
    }
  }

  /**
   * Compares the simulator's bytes in use while each op runs (levelled schedule) under three
   * models (no scratch, estimated scratch, the trace's scratch) with the trace, per op, sorted
   * by the largest absolute gap between the traced bytes and the estimated model's.
   */
  public static Comparison compare(DataflowGraph estimated, ScratchTrace trace) {
    DataflowGraph old = estimated.withoutScratch();
    DataflowGraph measured = estimated.withScratch(trace.scratchByOp());
    int[] levelled = Levels.of(estimated).schedule();
    // per op, the simulation follows the order TensorFlow ran: gaps are then about memory,
    // not about order; the peaks are given for both orders
    int[] order = trace.orderOf(estimated);
    MemoryProfile pOld = MemorySimulator.simulate(old, order);
    MemoryProfile pNew = MemorySimulator.simulate(estimated, order);
    MemoryProfile pMeasured = MemorySimulator.simulate(measured, order);
    // the allocator model's chunks in use, in the same order, under the unbudgeted trace's limit
    long[] alloc = BfcReplay.inUseWhileRunning(estimated, order,
        BudgetedRunner.UNBUDGETED_MIB << 20, BfcReplay.Layout.GRAPH_ORDER);
    Map<String, long[]> traced = new HashMap<>();
    long before = 0;
    Comparison c = new Comparison();
    for (ScratchTrace.Node n : trace.nodes()) {
      traced.put(n.name(), new long[] {Math.max(n.bytesInUse(), before + n.peakBytes()),
          n.scratchBytes()});
      before = n.bytesInUse();
      if (n.scratchBytes() > c.largestScratch) {
        c.largestScratch = n.scratchBytes();
        c.largestScratchOp = n.name();
      }
    }
    for (int i = 0; i < order.length; i++) {
      Op op = estimated.op(order[i]);
      long[] t = traced.get(op.name());
      if (t == null || OpTypes.SHAPE_ONLY.contains(op.type()) || MemorySimulator.isPinned(op)
          || OpTypes.CONSTANTS.contains(op.type())) {
        continue; // folded or pruned by grappler, or a constant: nothing to compare
      }
      c.rows.add(new Row(op.name(), op.type(), pOld.timeline()[i], pNew.timeline()[i],
          pMeasured.timeline()[i], t[0], t[1], estimated.scratchBytes(op.id()), alloc[i]));
    }
    c.rows.sort(Comparator.comparingLong((Row r) -> Math.abs(r.gap())).reversed()
        .thenComparing(Row::op));
    c.peakOld = MemorySimulator.simulate(old, levelled).peakBytes();
    c.peakNew = MemorySimulator.simulate(estimated, levelled).peakBytes();
    c.peakMeasured = MemorySimulator.simulate(measured, levelled).peakBytes();
    c.peakMeasuredTracedOrder = pMeasured.peakBytes();
    c.tracedPeak = trace.peakBytesInUse();
    c.tracedWithScratch = trace.peakBytesWithScratch();
    return c;
  }

  /** The Markdown of a result. */
  public static String markdown(ObjectNode root) {
    StringBuilder md = new StringBuilder("# Memory-model fidelity\n\n");
    if (root.hasNonNull("notes")) { // what was learnt, written after the run
      md.append(root.path("notes").asText()).append("\n\n## Results\n\n");
    }
    md.append("Command: `").append(root.path("command").asText()).append("`; machine: ")
        .append(root.path("machine").asText()).append(String.format(Locale.ROOT, "; %.1f min."
            + "%n%n", root.path("wall_seconds").asDouble() / 60));
    md.append("Predicted peak (levelled schedule) under the memory models: **old** (live "
        + "tensors only, before kernel scratch was modelled), **est** (scratch estimated from "
        + "op types and shapes, what planners use by default), **meas** (scratch measured by "
        + "one traced step, `DataflowGraph.withScratch`); **alloc** and **alloc+meas**: the "
        + "smallest budget under which the allocator model (`BfcReplay`: TensorFlow's BFC "
        + "allocator's whole chunks and region growth) fits the step, with estimated and with "
        + "measured scratch (a plan's variables created in the order its init gives them; a "
        + "rewritten graph's step in lms4j's serial order, the graph as given in TensorFlow's "
        + "own as `StepOrder.given` models it, which was the levelled schedule before the "
        + "twenty-first stop); "
        + "all against the smallest budget that "
        + "really trains (init + ").append(root.path("steps_per_probe").asInt())
        .append(" steps per probe in a budgeted worker, bisected to ")
        .append(Math.round(root.path("resolution").asDouble() * 100))
        .append("% of the upper bound). Error = predicted / real - 1. `auto`: the hybrid "
            + "planner at the first of ").append(root.path("plan_fractions").asText())
        .append(" of the no-LMS minimum it plans for; its rewritten graph's smallest budget "
            + "bisected.\n\n");
    md.append("**init**: what the init run alone needs of the allocator model "
        + "(`BfcReplay.replayInit`: variables hold memory from their assignment, taking their "
        + "value's buffer over where nobody reads it after; the initializers' temporaries come "
        + "and go), in the order that runs the smallest ready op first (about the least any "
        + "order needs), and in brackets in the executor's order over the graph's own "
        + "(TensorFlow's varies between processes); **run**: the larger of alloc and init in "
        + "the graph's order, the model's need for init and the steps.\n\n");
    md.append("| graph | method | real min | old | est | meas | alloc | alloc+meas | init "
        + "| run | traced peak (+scratch) | largest scratch |\n"
        + "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (var g : root.path("graphs")) {
      for (String m : List.of("no_lms", "auto")) {
        var r = g.path(m);
        if (r.isMissingNode()) {
          continue;
        }
        md.append("| ").append(g.path("graph").asText()).append(" | ")
            .append(m.equals("no_lms") ? "no LMS" : "auto @ " + Math.round(mib(
                r.path("budget_bytes").asLong())) + " MiB"
                + (r.has("planner") ? " (" + r.path("planner").asText() + ")" : ""))
            .append(" | ");
        if (r.has("error")) {
          md.append(r.path("error").asText()).append(" |||||||||\n");
          continue;
        }
        long real = r.path("min_budget_mib").asLong();
        md.append(real > 0 ? real + " MiB" : "none").append(" | ");
        for (String k : List.of("predicted_old_bytes", "predicted_new_bytes",
            "predicted_measured_scratch_bytes", "allocator_bytes",
            "allocator_measured_scratch_bytes")) {
          if (!r.has(k)) {
            md.append("- | "); // measured before the allocator model existed
            continue;
          }
          long p = r.path(k).asLong();
          md.append(String.format(Locale.ROOT, "%.1f", mib(p)));
          if (real > 0) {
            md.append(String.format(Locale.ROOT, " (%+.0f%%)", 100 * (mib(p) / real - 1)));
          }
          md.append(" | ");
        }
        if (r.has("predicted_init_bytes")) {
          long init = r.path("predicted_init_bytes").asLong();
          long inGraphOrder = r.path("predicted_init_graph_order_bytes").asLong();
          long run = Math.max(inGraphOrder, r.path("allocator_bytes").asLong());
          md.append(String.format(Locale.ROOT, "%.1f [%.1f] | %.1f", mib(init),
              mib(inGraphOrder), mib(run)));
          if (real > 0) {
            md.append(String.format(Locale.ROOT, " (%+.0f%%)", 100 * (mib(run) / real - 1)));
          }
          md.append(" | ");
        } else {
          md.append("- | - | ");
        }
        md.append(m.equals("no_lms") ? String.format(Locale.ROOT, "%.1f (%.1f) | %.1f MiB |%n",
            mib(g.path("traced_peak_bytes").asLong()),
            mib(g.path("traced_peak_with_scratch_bytes").asLong()),
            mib(g.path("largest_traced_scratch_bytes").asLong())) : " | |\n");
      }
    }
    md.append("\nLargest per-op gaps (traced bytes in use while the op ran minus the `est` "
        + "model's; **alloc**: the allocator model's chunks in use then, in TensorFlow's order), "
        + "MiB:\n\n| graph | op | type | old | est | meas | alloc | traced | scratch "
        + "traced / est |\n|---|---|---|---|---|---|---|---|---|\n");
    for (var g : root.path("graphs")) {
      int k = 0;
      for (var r : g.path("top_gaps")) {
        if (k++ >= 4) {
          break;
        }
        md.append(String.format(Locale.ROOT, "| %s | %s | %s | %.1f | %.1f | %.1f | %s | %.1f | "
            + "%.1f / %.1f |%n", g.path("graph").asText(), r.path("op").asText(),
            r.path("type").asText(), mib(r.path("predicted_old").asLong()),
            mib(r.path("predicted_new").asLong()), mib(r.path("predicted_measured").asLong()),
            r.has("predicted_allocator") && r.path("predicted_allocator").asLong() >= 0
                ? String.format(Locale.ROOT, "%.1f", mib(r.path("predicted_allocator").asLong()))
                : "-",
            mib(r.path("traced").asLong()), mib(r.path("traced_scratch").asLong()),
            mib(r.path("estimated_scratch").asLong())));
      }
    }
    boolean header = false;
    for (var g : root.path("graphs")) {
      var a = g.path("no_lms").path("at_min");
      if (a.isMissingNode()) {
        continue; // measured before this comparison existed
      }
      if (!header) {
        md.append("\nAt the real minimum (no LMS): one more step traced under that budget, and "
            + "the allocator model replaying the graph in that step's order under the same "
            + "limit; per op that allocated, the model's chunks in use while it ran against the "
            + "traced bytes in use (as above), MiB:\n\n| graph | budget | traced peak | model "
            + "peak | ops within 0.5 MiB | median gap | largest gap (op: model / traced) |\n"
            + "|---|---|---|---|---|---|---|\n");
        header = true;
      }
      md.append("| ").append(g.path("graph").asText()).append(" | ")
          .append(a.path("budget_mib").asLong()).append(" MiB | ");
      if (a.has("error")) {
        md.append(a.path("error").asText()).append(" |||||\n");
        continue;
      }
      var top = a.path("top_gaps").path(0);
      String modelPeak = String.format(Locale.ROOT, "%.1f", mib(a.path("allocator_peak_bytes")
          .asLong()));
      if (a.has("allocator_failed_at")) {
        modelPeak += " (out of memory at " + a.path("allocator_failed_at").asText() + ", "
            + a.path("ops_not_compared").asInt() + " ops not compared)";
      }
      md.append(String.format(Locale.ROOT, "%.1f | %s | %d of %d | %.2f | %s%n",
          mib(a.path("traced_peak_bytes").asLong()), modelPeak,
          a.path("within_half_mib").asInt(), a.path("ops_compared").asInt(),
          mib(a.path("median_abs_gap_bytes").asLong()), top.isMissingNode() ? "- |"
              : String.format(Locale.ROOT, "%s (%s): %.1f / %.1f |", top.path("op").asText(),
                  top.path("type").asText(), mib(top.path("allocator").asLong()),
                  mib(top.path("traced").asLong()))));
    }
    return md.toString();
  }

  private static String cut(String s, int n) {
    return s.length() <= n ? s : "..." + s.substring(s.length() - n + 3);
  }

  private static double mib(long b) {
    return b / 1048576.0;
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "";
    }
    int nl = s.indexOf('\n');
    return nl < 0 ? s : s.substring(0, nl);
  }

  private static void say(PrintStream out, String fmt, Object... args) {
    out.println(String.format(Locale.ROOT, fmt, args));
    out.flush();
  }

  private static void deleteTree(Path dir) {
    try (var s = Files.walk(dir)) {
      s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      LOG.debug("could not delete {}: {}", dir, e.toString());
    }
  }

  /**
   * Runs the suite from the command line: {@code [outDir] [label-prefix...]} (only the default
   * cases whose label starts with a prefix), or {@code --markdown fidelity.json} to rewrite the
   * Markdown next to a JSON result (e.g. after joining the graphs of two runs), or
   * {@code --repredict fidelity.json} to recompute its planner rows' predictions
   * ({@link #repredict}).
   */
  public static void main(String[] args) throws IOException {
    if (args.length == 2 && args[0].equals("--repredict")) {
      Path json = Path.of(args[1]);
      ObjectNode root = (ObjectNode) JSON.readTree(json.toFile());
      repredict(root, defaults(), System.out);
      Files.writeString(json, JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root)
          + "\n");
      Files.writeString(json.resolveSibling("fidelity.md"), markdown(root));
      return;
    }
    if (args.length == 2 && args[0].equals("--markdown")) {
      Path json = Path.of(args[1]);
      ObjectNode root = (ObjectNode) JSON.readTree(json.toFile());
      Files.writeString(json.resolveSibling("fidelity.md"), markdown(root));
      return;
    }
    Path outDir = Path.of(args.length > 0 ? args[0] : "docs/bench");
    List<Case> cases = new ArrayList<>(defaults());
    if (args.length > 1) {
      List<String> want = List.of(args).subList(1, args.length);
      cases.removeIf(c -> want.stream().noneMatch(w -> c.label().startsWith(w)));
    }
    run(cases, outDir, System.out);
  }
}
