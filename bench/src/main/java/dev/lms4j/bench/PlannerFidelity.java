package dev.lms4j.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.Probe;
import dev.lms4j.tf.run.RunResult;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.RewriterConfig;

/**
 * {@code lms4j bench --suite fidelity-planners}: per graph, the memory model's predicted need
 * against the smallest budget that really trains, without LMS and with each planner
 * ({@code tflms}, {@code swap}, {@code remat}, {@code auto}) at two budgets (60 and 85% of the
 * graph's predicted need without LMS). Every row is run: the plan's rewritten graph at the
 * budget (init and two steps in a budgeted worker), its own smallest budget bisected, and the
 * probe ({@link Probe#closeLoop}) with its verdict and re-plans, after which the graph the probe
 * hands back runs again under the budget.
 *
 * <p>The prediction is the allocator model's ({@link BfcReplay#smallestMib}, levelled schedule):
 * for the graph as given on its imported model; for a plan on the planner's model with the plan
 * applied ({@link Fidelity#allocatorMin}), what the allocator check accepts plans by.
 *
 * <p>Bisections start at the prediction: a probe there, then steps of 10% down (while it trains)
 * or up (while it does not) until the edge is bracketed, then bisection to 3% of the upper bound
 * or 1 MiB, whichever is larger. Results per rewritten graph (by the hash of its GraphDef) and
 * budget are kept, so two rows with the same graph share one bisection.
 *
 * <pre>{@code
 * ObjectNode r = PlannerFidelity.run(Acceptance.defaults(), Path.of("docs/bench"), false,
 *     System.out);
 * }</pre>
 */
public final class PlannerFidelity {
  private static final Logger LOG = LoggerFactory.getLogger(PlannerFidelity.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int STEPS = 2;
  /** The planners of the table. */
  static final List<LmsMode> MODES = List.of(LmsMode.TFLMS, LmsMode.SWAP, LmsMode.REMAT,
      LmsMode.AUTO);
  /** Budgets as fractions of the allocator model's need of the graph as given. */
  static final double[] FRACTIONS = {0.6, 0.85};
  /** Bisection resolution: this share of the upper bound, at least 1 MiB. */
  static final double RESOLUTION = 0.03;
  /** Bracketing step from the prediction. */
  static final double STEP = 0.10;
  /** Above this the search gives up ("none"). */
  static final long MAX_MIB = 16_384;
  /** Rows within this relative error count as on target. */
  static final double TARGET = 0.05;
  static final String FILE = "fidelity-planners";

  private PlannerFidelity() {}

  /** What is known of one rewritten graph: probed budgets and, once bisected, its minimum. */
  static final class Known {
    final TreeMap<Long, Boolean> fits = new TreeMap<>();
    /** Runs at a row's budget: their outcome and error, by budget. */
    final Map<Long, String[]> atBudget = new HashMap<>();
    long min = 0; // 0: not bisected yet; -1: none up to MAX_MIB
    long fails = 0;
    String bisectedFor;
    int probes;
  }

  /** The state of one run: what every graph probed so far did. */
  static final class Runs {
    final Map<String, Known> byGraph = new HashMap<>();
    int workerRuns;
    final PrintStream out;

    Runs(PrintStream out) {
      this.out = out;
    }

    Known known(GraphDef gd) {
      return byGraph.computeIfAbsent(hash(gd), k -> new Known());
    }

    /** Init and two steps of {@code tg} under {@code mib} (cached per graph and budget). */
    boolean fits(TrainingGraph tg, Known k, long mib, String label) throws IOException {
      Boolean seen = k.fits.get(mib);
      if (seen != null) {
        return seen;
      }
      RunResult r = run(tg, mib);
      boolean ok = r.fits();
      k.fits.put(mib, ok);
      k.probes++;
      say(out, "  %s %d MiB: %s", label, mib, ok ? "trains" : r.oom() ? "OOM" : "failed");
      return ok;
    }

    RunResult run(TrainingGraph tg, long mib) throws IOException {
      workerRuns++;
      RunResult r = BudgetedRunner.run(tg, new BudgetedRunner.Options(mib << 20, STEPS, 42,
          true, RewriterConfig.MemOptType.DEFAULT_MEM_OPT, Duration.ofMinutes(10)));
      if (!r.fits() && !r.oom()) {
        LOG.warn("run at {} MiB failed: {}", mib, r.error());
      }
      return r;
    }

    /**
     * The smallest MiB at which {@code tg} trains, searched from {@code predictedMib}; -1 when
     * nothing up to {@link #MAX_MIB} trains. Reuses an earlier bisection of the same graph.
     */
    long smallest(TrainingGraph tg, Known k, long predictedMib, String label)
        throws IOException {
      if (k.min != 0) {
        return k.min;
      }
      Bisection.Edge e = search(mib -> fits(tg, k, mib, label), k.fits, predictedMib);
      k.min = e.fits();
      k.fails = e.fails();
      k.bisectedFor = label;
      return k.min;
    }
  }

  /**
   * The smallest budget that fits, from {@code predictedMib}: {@link #bracket}, then bisection
   * to {@link #RESOLUTION} of the upper bound (at least 1 MiB); {@code fits} is -1 when nothing
   * up to {@link #MAX_MIB} fits. {@code p} should answer budgets in {@code seen} from it.
   */
  static Bisection.Edge search(Bisection.Probe p, TreeMap<Long, Boolean> seen,
      long predictedMib) throws IOException {
    Bracket b = bracket(p, seen, predictedMib);
    if (b.fits() < 0) {
      return new Bisection.Edge(b.fails(), -1);
    }
    return Bisection.search(b.fails(), b.fits(), Math.max(1, (long) (b.fits() * RESOLUTION)),
        p);
  }

  /** A bracket: {@code fails} does not train (0: nothing below tried), {@code fits} does. */
  record Bracket(long fails, long fits) {}

  /**
   * Brackets the smallest budget that fits: budgets already probed narrow it; otherwise a
   * probe at the prediction, then steps of {@link #STEP} down while it fits or up while it does
   * not. {@code fits} is -1 when nothing up to {@link #MAX_MIB} fits.
   */
  static Bracket bracket(Bisection.Probe p, TreeMap<Long, Boolean> seen, long predictedMib)
      throws IOException {
    long lo = 0;
    long hi = -1;
    for (var e : seen.entrySet()) { // monotone: the largest failure below the smallest fit
      if (e.getValue()) {
        hi = hi < 0 ? e.getKey() : Math.min(hi, e.getKey());
      }
    }
    for (var e : seen.entrySet()) {
      if (!e.getValue() && (hi < 0 || e.getKey() < hi)) {
        lo = Math.max(lo, e.getKey());
      }
    }
    long x = Math.max(1, Math.min(MAX_MIB, predictedMib));
    if (hi > 0 && x >= hi) {
      x = hi;
    }
    if (x <= lo) {
      x = Math.min(MAX_MIB, lo + step(lo));
    }
    if (p.fits(x)) {
      hi = x;
      while (hi - lo > step(hi)) {
        long down = hi - step(hi);
        if (!p.fits(down)) {
          return new Bracket(down, hi);
        }
        hi = down;
      }
      return new Bracket(lo, hi);
    }
    lo = x;
    while (hi < 0 || hi - lo > step(lo)) {
      if (lo >= MAX_MIB) {
        return new Bracket(lo, -1);
      }
      long up = Math.min(MAX_MIB, lo + step(lo));
      if (hi > 0 && up >= hi) {
        break;
      }
      if (p.fits(up)) {
        return new Bracket(lo, up);
      }
      lo = up;
    }
    return new Bracket(lo, hi);
  }

  private static long step(long mib) {
    return Math.max(1, (long) Math.ceil(mib * STEP));
  }

  /**
   * Measures {@code cases} with the default planners and budgets; writes
   * {@code fidelity-planners.json} and {@code .md} under {@code outDir} after every graph. With
   * {@code append}, the rows of graphs this run does not measure are kept from the file there.
   */
  public static ObjectNode run(List<Fidelity.Case> cases, Path outDir, boolean append,
      PrintStream out) throws IOException {
    ObjectNode root = JSON.createObjectNode();
    Path json = outDir.resolve(FILE + ".json");
    List<JsonNode> kept = new ArrayList<>();
    double wallBefore = 0;
    int runsBefore = 0;
    if (append && Files.exists(json)) {
      JsonNode old;
      try {
        old = JSON.readTree(json.toFile());
      } catch (IOException e) {
        throw new IllegalArgumentException("--append: cannot read " + json + ": "
            + firstLine(e.getMessage()));
      }
      Set<String> now = new LinkedHashSet<>();
      cases.forEach(c -> now.add(c.label()));
      old.path("rows").forEach(r -> {
        if (!now.contains(r.path("graph").asText())) {
          kept.add(r);
        }
      });
      wallBefore = old.path("wall_seconds").asDouble();
      runsBefore = old.path("worker_runs").asInt();
      if (old.has("notes")) {
        root.set("notes", old.get("notes"));
      }
    }
    Files.createDirectories(outDir);
    root.put("schema", "lms4j-bench-fidelity-planners/1").put("suite", "fidelity-planners")
        .put("machine", Machine.describe())
        .put("command", Fidelity.command("fidelity-planners", cases, Acceptance.defaults()))
        .put("steps", STEPS).put("fractions", Arrays.toString(FRACTIONS))
        .put("modes", MODES.stream().map(LmsMode::cliName).toList().toString())
        .put("resolution", RESOLUTION).put("step", STEP)
        .put("defaults", Acceptance.defaults().stream().map(Fidelity.Case::label).toList()
            .toString());
    ArrayNode rows = root.putArray("rows");
    kept.forEach(rows::add);
    Runs runs = new Runs(out);
    long t0 = System.nanoTime();
    for (Fidelity.Case c : cases) {
      long g0 = System.nanoTime();
      for (ObjectNode row : measure(c, MODES, FRACTIONS, runs)) {
        rows.add(row);
      }
      say(out, "%s: %.1f min, %d worker runs so far", c.label(),
          (System.nanoTime() - g0) / 6e10, runs.workerRuns);
      root.put("wall_seconds", wallBefore + (System.nanoTime() - t0) / 1e9)
          .put("worker_runs", runsBefore + runs.workerRuns);
      write(root, outDir);
    }
    out.println(markdown(root));
    return root;
  }

  /** All rows of one graph: no LMS, then each mode at each fraction. */
  static List<ObjectNode> measure(Fidelity.Case c, List<LmsMode> modes, double[] fractions,
      Runs runs) throws IOException {
    TrainingGraph tg = c.build().get();
    List<ObjectNode> rows = new ArrayList<>();
    ObjectNode none = noLms(c.label(), tg, runs);
    rows.add(none);
    long need = none.path("predicted_mib").asLong();
    for (double f : fractions) {
      for (LmsMode m : modes) {
        ObjectNode row = planned(c.label(), tg, need, m, f, runs);
        rows.add(row);
        say(runs.out, "%s", line(row));
      }
    }
    return rows;
  }

  /** The graph as given: the allocator model's need against its bisected minimum. */
  static ObjectNode noLms(String label, TrainingGraph tg, Runs runs) throws IOException {
    DataflowGraph g = Fidelity.model(tg);
    long need = BfcReplay.smallestMib(g, Levels.of(g).schedule(), 1L << 16);
    ObjectNode row = JSON.createObjectNode().put("graph", label).put("mode", "none")
        .put("predicted_mib", need);
    Known k = runs.known(tg.graphDef());
    long real = runs.smallest(tg, k, need, label + " no-lms");
    putReal(row, k, real, label + " no-lms");
    say(runs.out, "%s", line(row));
    return row;
  }

  /** One planner at {@code fraction} of {@code needMib}. */
  static ObjectNode planned(String label, TrainingGraph tg, long needMib, LmsMode mode,
      double fraction, Runs runs) throws IOException {
    long mib = Math.max(1, Math.round(needMib * fraction));
    long budget = mib << 20;
    String rowName = label + " " + mode.cliName() + "@" + mib;
    ObjectNode row = JSON.createObjectNode().put("graph", label).put("mode", mode.cliName())
        .put("fraction", fraction).put("budget_mib", mib);
    Lms lms = Lms.builder().budget(budget).mode(mode).build();
    LmsResult plan = null;
    try {
      plan = lms.rewrite(tg);
    } catch (PlanningException e) {
      row.put("planner", "refused").put("refusal", firstLine(e.getMessage()))
          .put("no_probe", "refused");
    } catch (RuntimeException e) {
      LOG.warn("{}: planning failed", rowName, e);
      row.put("planner", "error").put("refusal", firstLine(String.valueOf(e.getMessage())))
          .put("no_probe", "error");
    }
    GraphDef rewritten = null;
    String noProbe = null;
    if (plan != null) {
      rewritten = plan.graphDef();
      row.put("planner", plan.planner() == null ? "none" : plan.planner())
          .put("rewritten", plan.rewritten())
          .put("simulated_peak_mib", plan.predictedPeakAfter() / 1048576.0);
      long predicted = Fidelity.allocatorMin(plan.model(), plan.memoryPlan(), plan.initLayout(),
          Fidelity.stepOrder(plan, tg.manifest())) >> 20;
      row.put("predicted_mib", predicted);
      TrainingGraph rw = new TrainingGraph(rewritten, tg.manifest());
      Known k = runs.known(rewritten);
      String[] seen = k.atBudget.get(mib);
      if (seen == null) { // the same graph at the same budget runs once
        RunResult r = runs.run(rw, mib);
        seen = new String[] {outcome(r), r.fits() ? null : firstLine(r.error()), rowName};
        k.atBudget.put(mib, seen);
        k.fits.putIfAbsent(mib, r.fits());
      } else {
        row.put("no_probe_run_of", seen[2]);
      }
      noProbe = seen[0];
      row.put("no_probe", noProbe);
      if (seen[1] != null) {
        row.put("no_probe_error", seen[1]);
      }
      say(runs.out, "  %s at the budget: %s", rowName, noProbe);
      long real = runs.smallest(rw, k, predicted, rowName);
      putReal(row, k, real, rowName);
    }
    Probe.Outcome o = Probe.closeLoop(tg, lms,
        Probe.Options.of(budget, lms));
    row.put("probe", o.verdict().name().toLowerCase(Locale.ROOT)).put("replans", o.replans())
        .put("probes", o.attempts().size());
    if (o.trains()) {
      if (noProbe != null && o.graphDef().equals(rewritten)) {
        // the probe accepted the very graph that already ran at this budget
        row.put("after_probe", noProbe).put("after_probe_same_run", true);
      } else {
        RunResult after = runs.run(new TrainingGraph(o.graphDef(), tg.manifest()), mib);
        row.put("after_probe", outcome(after));
        if (!after.fits()) {
          row.put("after_probe_error", firstLine(after.error()));
        }
      }
    } else {
      row.put("after_probe", "-").put("probe_message", firstLine(o.message()));
    }
    return row;
  }

  private static void putReal(ObjectNode row, Known k, long real, String rowName) {
    row.put("real_min_mib", real).put("real_fails_mib", k.fails).put("probes_bisect", k.probes);
    if (k.bisectedFor != null && !k.bisectedFor.equals(rowName)) {
      row.put("bisection_of", k.bisectedFor);
    }
    if (real > 0 && row.has("predicted_mib") && row.path("predicted_mib").asLong() > 0) {
      row.put("error", (double) row.path("predicted_mib").asLong() / real - 1);
    }
  }

  private static String outcome(RunResult r) {
    return r.fits() ? "trains" : r.oom() ? "oom" : "failed";
  }

  static String hash(GraphDef gd) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
          .digest(gd.toByteArray()));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String line(JsonNode r) {
    return String.format(Locale.ROOT, "%s %s: planner %s, predicted %s, real %s (%s); at B %s;"
        + " probe %s (%d) -> %s", r.path("graph").asText(), method(r),
        r.path("planner").asText("-"), r.has("predicted_mib") ? r.path("predicted_mib").asLong()
            + " MiB" : "-", real(r), err(r), r.path("no_probe").asText("-"),
        r.path("probe").asText("-"), r.path("replans").asInt(), r.path("after_probe").asText("-"));
  }

  private static void write(ObjectNode root, Path outDir) throws IOException {
    Files.writeString(outDir.resolve(FILE + ".json"),
        JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    Files.writeString(outDir.resolve(FILE + ".md"), markdown(root));
  }

  /**
   * The table's figures.
   *
   * @param rows          rows in all
   * @param compared      rows with a prediction and a real minimum
   * @param within5       of them within 5%
   * @param within10      of them within 10%
   * @param medianAbs     median |error| (NaN when none compared)
   * @param over          predicted above the real minimum
   * @param under         predicted below it
   * @param accepted      plans {@code Lms.rewrite} accepted
   * @param aboveBudget   of them predicted (allocator model) above their budget: the
   *                      allocator check kept the closest plan, with a warning
   * @param acceptedOom   of them out of memory (or failed) at their budget without the probe
   * @param probeTrains   rows where the probe let training go on
   * @param oomAfterProbe of them out of memory (or failed) when run again
   * @param replans       the probe's re-plans together
   */
  record Summary(int rows, int compared, int within5, int within10, double medianAbs, int over,
      int under, int accepted, int aboveBudget, int acceptedOom, int probeTrains,
      int oomAfterProbe, int replans) {}

  static Summary summary(JsonNode root) {
    return summary(root, false);
  }

  /**
   * The figures; with {@code distinct}, rows that reuse another row's bisection (the same
   * rewritten graph) are left out, so each graph measured counts once.
   */
  static Summary summary(JsonNode root, boolean distinct) {
    int rows = 0;
    int w5 = 0;
    int w10 = 0;
    int over = 0;
    int under = 0;
    int accepted = 0;
    int acceptedOom = 0;
    int above = 0;
    int probeTrains = 0;
    int oomAfter = 0;
    int replans = 0;
    List<Double> abs = new ArrayList<>();
    for (JsonNode r : root.path("rows")) {
      if (distinct && r.has("bisection_of")) {
        continue;
      }
      rows++;
      if (r.has("error")) {
        double e = r.path("error").asDouble();
        abs.add(Math.abs(e));
        if (Math.abs(e) <= TARGET + 1e-9) {
          w5++;
        }
        if (Math.abs(e) <= 2 * TARGET + 1e-9) {
          w10++;
        }
        if (e > 0) {
          over++;
        } else if (e < 0) {
          under++;
        }
      }
      if (r.path("mode").asText().equals("none")) {
        continue;
      }
      String np = r.path("no_probe").asText();
      if (!np.equals("refused") && !np.equals("error")) {
        accepted++;
        if (r.path("predicted_mib").asLong() > r.path("budget_mib").asLong()) {
          above++;
        }
        if (!np.equals("trains")) {
          acceptedOom++;
        }
      }
      String after = r.path("after_probe").asText();
      if (!after.equals("-")) {
        probeTrains++;
        if (!after.equals("trains")) {
          oomAfter++;
        }
      }
      replans += r.path("replans").asInt();
    }
    abs.sort(null);
    double median = abs.isEmpty() ? Double.NaN : abs.size() % 2 == 1 ? abs.get(abs.size() / 2)
        : (abs.get(abs.size() / 2 - 1) + abs.get(abs.size() / 2)) / 2;
    return new Summary(rows, abs.size(), w5, w10, median, over, under, accepted, above,
        acceptedOom, probeTrains, oomAfter, replans);
  }

  private static String method(JsonNode r) {
    return r.path("mode").asText().equals("none") ? "no LMS"
        : r.path("mode").asText() + " @ " + Math.round(r.path("fraction").asDouble() * 100) + "%";
  }

  private static String real(JsonNode r) {
    if (!r.has("real_min_mib")) {
      return "-";
    }
    long m = r.path("real_min_mib").asLong();
    return m > 0 ? m + " MiB" : "none <= " + MAX_MIB + " MiB";
  }

  private static String err(JsonNode r) {
    return r.has("error") ? String.format(Locale.ROOT, "%+.1f%%", 100 * r.path("error")
        .asDouble()) : "-";
  }

  /** The Markdown of a result. */
  public static String markdown(JsonNode root) {
    StringBuilder md = new StringBuilder("# Fidelity per planner: predicted need vs the "
        + "smallest budget that trains\n\n");
    if (root.hasNonNull("notes")) {
      md.append(root.path("notes").asText()).append("\n\n## Results\n\n");
    }
    int probes = 0;
    for (JsonNode r : root.path("rows")) {
      probes += r.path("probes").asInt();
    }
    md.append(String.format(Locale.ROOT, "Command: `%s`; machine: %s; %.1f min, %d worker runs "
        + "(bisections, runs at B, after the probe) and %d probe runs. Another benchmark ran on "
        + "the machine at the same time: memory minima do not depend on load, wall time does."
        + "%n%n", root.path("command").asText(), root.path("machine").asText(),
        root.path("wall_seconds").asDouble() / 60, root.path("worker_runs").asInt(), probes));
    md.append("Per graph: **no LMS**, then each planner (").append(root.path("modes").asText())
        .append(", `Lms.builder().budget(B).mode(m)`: the default memory ratio, allocator check on) at ")
        .append("budgets B = ").append(root.path("fractions").asText())
        .append(" of the no-LMS prediction. **predicted**: the allocator model's need ")
        .append("(`BfcReplay.smallestMib`, whole MiB): for no LMS on the graph as imported, ")
        .append("levelled schedule; for a plan on the planner's model with the plan applied ")
        .append("(`Fidelity.allocatorMin(result.model(), result.memoryPlan(), ")
        .append("result.initLayout(), Fidelity.stepOrder(result, manifest))`: init in the order ")
        .append("the plan gives it, the step in the serial order with its unchained ops run as ")
        .append("TensorFlow's executor runs them; what the allocator check accepts plans by). ")
        .append("**real min**: the smallest budget at which ")
        .append("the graph (for a plan: the rewritten graph) runs init and ")
        .append(root.path("steps").asInt()).append(" steps in a budgeted worker ")
        .append("(`TF_CPU_BFC_MEM_LIMIT_IN_MB`), bracketed from the prediction (a run there, ")
        .append("then steps of ").append(Math.round(root.path("step").asDouble() * 100))
        .append("% down while it trains or up while it does not) and bisected to ")
        .append(Math.round(root.path("resolution").asDouble() * 100))
        .append("% of the upper bound or 1 MiB; so the real minimum lies within that step ")
        .append("below the figure. Rows whose rewritten GraphDef is identical share one ")
        .append("bisection (`bisection_of` in the JSON). **error** = predicted / real - 1. ")
        .append("**at B**: the plan as `Lms.rewrite` hands it over, run at B. **probe**: ")
        .append("`Probe.closeLoop` at B (the plan's ratio), its verdict and re-plans; **after**: the ")
        .append("graph it hands back run again at B (when it is the very graph already run at ")
        .append("B, that run is reported; rows with the same rewritten graph at the same budget ")
        .append("share that run too).\n\n");
    md.append(String.format(Locale.ROOT, "| counted | rows | predicted and measured | within 5%% | within "
        + "10%% | median abs error | over / under-predicted | plans accepted | of them "
        + "predicted above B | of them OOM at B without the probe | probe let training go on | "
        + "of them OOM after the probe | re-plans |%n|---|---|---|---|---|---|---|---|---|---|"
        + "---|---|---|%n"));
    for (boolean distinct : new boolean[] {false, true}) {
      Summary s = summary(root, distinct);
      md.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %d | %.1f%% | %d / %d | %d | "
          + "%d | %d | %d | %d | %d |%n", distinct ? "each bisected graph once" : "every row",
          s.rows(), s.compared(), s.within5(), s.within10(), 100 * s.medianAbs(), s.over(),
          s.under(), s.accepted(), s.aboveBudget(), s.acceptedOom(), s.probeTrains(),
          s.oomAfterProbe(), s.replans()));
    }
    md.append('\n');
    List<String> measured = new ArrayList<>();
    root.path("rows").forEach(r -> {
      if (!measured.contains(r.path("graph").asText())) {
        measured.add(r.path("graph").asText());
      }
    });
    String defaults = root.path("defaults").asText("");
    if (defaults.length() > 2) {
      List<String> missing = new ArrayList<>();
      for (String d : defaults.substring(1, defaults.length() - 1).split(", ")) {
        if (!measured.contains(d)) {
          missing.add(d);
        }
      }
      if (!missing.isEmpty()) {
        md.append("Not measured in this run (of the default graphs): ")
            .append(String.join(", ", missing)).append(".\n\n");
      }
    }
    List<JsonNode> worst = new ArrayList<>();
    root.path("rows").forEach(r -> {
      if (r.has("error")) {
        worst.add(r);
      }
    });
    worst.sort(java.util.Comparator.comparingDouble((JsonNode r) -> -Math.abs(r.path("error")
        .asDouble())));
    if (!worst.isEmpty()) {
      md.append("Largest errors: ");
      for (int i = 0; i < Math.min(5, worst.size()); i++) {
        JsonNode r = worst.get(i);
        md.append(i == 0 ? "" : "; ").append(r.path("graph").asText()).append(' ')
            .append(method(r)).append(String.format(Locale.ROOT, " %d vs %d MiB (%s)",
                r.path("predicted_mib").asLong(), r.path("real_min_mib").asLong(), err(r)));
      }
      md.append(".\n\n");
    }
    md.append("| graph | method | budget | planner chosen | predicted | real min | error | "
        + "at B without probe | probe (re-plans) | after probe |\n"
        + "|---|---|---|---|---|---|---|---|---|---|\n");
    for (JsonNode r : root.path("rows")) {
      boolean none = r.path("mode").asText().equals("none");
      String planner = r.path("planner").asText("-");
      if (r.has("refusal")) {
        planner += ": " + cut(r.path("refusal").asText(), 90);
      }
      md.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |%n",
          r.path("graph").asText(), method(r), none ? "-" : r.path("budget_mib").asLong()
              + " MiB", none ? "-" : planner, r.has("predicted_mib")
              ? r.path("predicted_mib").asLong() + " MiB" : "-", real(r), err(r),
          none ? "-" : r.path("no_probe").asText(), none ? "-" : r.path("probe").asText() + " ("
              + r.path("replans").asInt() + ")", none ? "-" : r.path("after_probe").asText()));
    }
    return md.toString();
  }

  /**
   * Rewrites the Markdown next to a result: {@code --markdown fidelity-planners.json} (e.g.
   * after notes were added to the JSON).
   */
  public static void main(String[] args) throws IOException {
    if (args.length != 2 || !args[0].equals("--markdown")) {
      System.err.println("usage: PlannerFidelity --markdown fidelity-planners.json");
      System.exit(2);
      return;
    }
    Path json = Path.of(args[1]);
    Files.writeString(json.resolveSibling(FILE + ".md"), markdown(JSON.readTree(json.toFile())));
  }

  private static String cut(String s, int n) {
    return s.length() <= n ? s : s.substring(0, n - 3) + "...";
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
}
