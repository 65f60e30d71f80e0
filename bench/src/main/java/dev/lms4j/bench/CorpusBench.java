package dev.lms4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.bench.ModelBench.Method;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import dev.lms4j.train.corpus.Corpus;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code lms4j bench --suite corpus}: per corpus family ({@link Corpus}), TensorFlow's own
 * smallest budget under each grappler {@code memory_optimization} mode, side by side with the
 * smallest budget of each lms4j mode ({@code tflms}, {@code swap}, {@code remat}, {@code auto}),
 * as a fraction of TensorFlow's own minimum (the unmodified graph, grappler's default), with the
 * predicted and the measured peak at that budget and whether the losses equal the unbudgeted
 * run's.
 *
 * <p>Every probe is a worker JVM under the BFC limit running {@code init} and two steps, so a
 * graph whose initialisation needs more memory than a step is measured by its initialisation,
 * as a user would meet it. Every other mode is searched between half the floor and TensorFlow's
 * minimum: one that does not train at TensorFlow's minimum is recorded as such (for an lms4j
 * mode: worse than TensorFlow), not searched above it.
 *
 * <p>Where the rewrites lms4j runs before planning ({@code GradientSums}, {@code OptimizerEdges},
 * {@code SparseUpdates}, on by default) change a family's graph, each lms4j mode is measured with
 * them and without them ({@code --no-gradient-sums --no-optimizer-edges --no-sparse-updates
 * --no-slot-offload}; {@code SlotOffload} applies only where no plan fits otherwise), side by
 * side in the same run.
 */
public final class CorpusBench {
  private static final Logger LOG = LoggerFactory.getLogger(CorpusBench.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final List<Method> TF_MODES = List.of(Method.NONE,
      Method.GRAPPLER_RECOMPUTATION, Method.GRAPPLER_HEURISTICS, Method.GRAPPLER_SCHEDULING);
  private static final List<Method> LMS_MODES = List.of(Method.TFLMS, Method.SWAP, Method.REMAT,
      Method.AUTO);

  /**
   * One column of the table: a method, and for an lms4j mode whether the rewrites before
   * planning ({@code GradientSums}, {@code OptimizerEdges}; on by default) run, whether its plan
   * is probed, and whether its rewritten graph runs in a fixed order
   * ({@code LmsBuilder.serialOrder}).
   */
  record Column(String label, Method method, boolean pre, boolean probe, boolean ordered) {
    static Column of(Method m) {
      return new Column(m.label, m, true, false, false);
    }

    static Column withoutPre(Method m) {
      return new Column(m.label + " (no pre-rewrites)", m, false, false, false);
    }

    /** The same column, its rewritten graphs in a fixed order or not. */
    Column ordered(boolean on) {
      return new Column(label, method, pre, probe, on);
    }

    /**
     * An lms4j mode as {@code run}, {@code train} and the LMS callback use it: its plan is
     * probed under the budget ({@code Probe.closeLoop}: the other modes' plans when it runs out
     * of memory, then lower limits), and the graph the probe hands back is run again.
     */
    static Column probed(Method m) {
      return new Column(m.label + " + probe", m, true, true, false);
    }
  }
  private static final int STEPS = 2;
  /** Runs the bisected TensorFlow minimum must train again, in a row ({@link #confirmed}). */
  static final int CONFIRM_RUNS = 2;

  private CorpusBench() {}

  /**
   * Runs the suite and writes {@code corpus-<name>.json} and {@code .md} under {@code outDir}.
   *
   * @param name       the file name's suffix (e.g. {@code baseline})
   * @param families   the families to measure
   * @param size       the graphs' size
   * @param resolution relative resolution of the bisections (0.08 = within 8% of TF's minimum)
   * @param outDir     where the results go
   * @param out        progress and the table
   * @return the JSON written
   */
  public static ObjectNode run(String name, List<Corpus.Family> families, Corpus.Size size,
      double resolution, Path outDir, PrintStream out) throws IOException {
    return run(name, families, size, resolution, false, outDir, out);
  }

  /**
   * As above; with {@code append}, the families already in {@code corpus-<name>.json} that are
   * not measured again are kept (each family records the resolution it was measured with).
   */
  public static ObjectNode run(String name, List<Corpus.Family> families, Corpus.Size size,
      double resolution, boolean append, Path outDir, PrintStream out) throws IOException {
    return run(name, families, size, resolution, append, false, outDir, out);
  }

  /** The command line that runs what {@link #run} was given, as the result files record it. */
  static String command(String name, List<Corpus.Family> families, Corpus.Size size,
      double resolution, boolean append, boolean serialOrder) {
    String sz = size.name().toLowerCase(Locale.ROOT);
    StringBuilder c = new StringBuilder("./lms4j bench --suite corpus");
    if (!sz.equals("bench")) {
      c.append(" --size ").append(sz);
    }
    if (!families.equals(Corpus.families())) {
      c.append(" --families ").append(String.join(",",
          families.stream().map(Corpus.Family::label).toList()));
    }
    c.append(String.format(Locale.ROOT, " --resolution %s", resolution));
    if (!name.equals(sz)) {
      c.append(" --tag ").append(name);
    }
    if (append) {
      c.append(" --append");
    }
    c.append(serialOrder ? " --serial-order" : " --no-serial-order");
    return c.toString();
  }

  /**
   * As above; with {@code serialOrder}, every lms4j mode rewrites with
   * {@code LmsBuilder.serialOrder(true)} (the rewritten graphs run in one fixed order, as run and
   * train run them by default), else with {@code serialOrder(false)}.
   */
  public static ObjectNode run(String name, List<Corpus.Family> families, Corpus.Size size,
      double resolution, boolean append, boolean serialOrder, Path outDir, PrintStream out)
      throws IOException {
    Files.createDirectories(outDir);
    List<ObjectNode> kept = new ArrayList<>();
    double keptSeconds = 0;
    Path existing = outDir.resolve("corpus-" + name + ".json");
    if (append && Files.exists(existing)) {
      var old = JSON.readTree(existing.toFile());
      keptSeconds = old.path("wall_seconds").asDouble();
      for (var f : old.path("families")) {
        boolean again = families.stream().anyMatch(x -> x.label().equals(f.path("family")
            .asText()));
        if (!again) {
          ObjectNode copy = ((ObjectNode) f).deepCopy();
          if (!copy.has("resolution")) {
            copy.put("resolution", old.path("resolution").asDouble());
          }
          kept.add(copy);
        }
      }
    }
    ObjectNode root = JSON.createObjectNode();
    root.put("schema", "lms4j-bench-corpus/1").put("suite", "corpus")
        .put("machine", Machine.describe())
        .put("command", command(name, families, size, resolution, append, serialOrder))
        .put("serial_order", serialOrder)
        .put("size", size.name().toLowerCase(Locale.ROOT))
        .put("resolution", resolution).put("steps_per_probe", STEPS);
    ArrayNode rows = root.putArray("families");
    kept.forEach(rows::add);
    long t0 = System.nanoTime() - (long) (keptSeconds * 1e9);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      for (Corpus.Family f : families) {
        rows.add(family(f, size, resolution, serialOrder, pool, out)
            .put("resolution", resolution));
        // written after every family, so a long run that is stopped keeps what it measured
        root.put("wall_seconds", (System.nanoTime() - t0) / 1e9);
        write(root, outDir, name);
      }
    } finally {
      pool.shutdownNow();
    }
    String md = write(root, outDir, name);
    out.println(md);
    LOG.info("corpus bench done: {}", outDir.resolve("corpus-" + name + ".json"));
    return root;
  }

  private static String write(ObjectNode root, Path outDir, String name) throws IOException {
    Files.writeString(outDir.resolve("corpus-" + name + ".json"),
        JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    String md = markdown(root);
    Files.writeString(outDir.resolve("corpus-" + name + ".md"), md);
    return md;
  }

  private static ObjectNode family(Corpus.Family f, Corpus.Size size, double resolution,
      boolean serialOrder, ExecutorService pool, PrintStream out) throws IOException {
    TrainingGraph tg = f.build(size, 42);
    DataflowGraph model = GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(),
        -1, GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
    long floor = LowerBound.of(model);
    long simulated = MemorySimulator.simulate(model, model.topologicalOrder()).peakBytes();
    RunResult free = BudgetedRunner.run(tg, options(0, Method.NONE));
    ObjectNode node = JSON.createObjectNode();
    boolean preChanges = preRewritesChange(tg, model);
    node.put("family", f.label()).put("description", f.description())
        .put("pre_rewrites_change_graph", preChanges)
        .put("ops", model.size()).put("parameter_bytes", model.persistentBytes())
        .put("floor_bytes", floor).put("predicted_peak_bytes", simulated);
    if (!free.fits()) {
      node.put("error", "the unbudgeted run failed: " + free.error());
      say(out, "%s: the unbudgeted run failed: %s", f.label(), free.error());
      return node;
    }
    double[] reference = free.losses();
    node.put("measured_peak_bytes", free.peakBytes());
    say(out, "== %s: %d ops, parameters %.1f MiB, floor %.1f MiB, predicted peak %.1f MiB, "
        + "measured %.1f MiB", f.label(), model.size(), mib(model.persistentBytes()), mib(floor),
        mib(simulated), mib(free.peakBytes()));
    final long lo = Math.max(1, (floor >> 20) / 2);
    long noLmsLo = lo;
    long hi = (free.peakBytes() >> 20) * 3 / 2 + 16;
    // a step's traced peak misses kernel scratch and the init run: double until no-LMS trains
    while (hi < 16_384 && attempt(tg, Method.NONE, hi, reference).mib < 0) {
      say(out, "  %-18s %-16s %5d MiB: OOM, doubling", f.label(), Method.NONE.label, hi);
      noLmsLo = hi;
      hi *= 2;
    }
    Map<Column, Probe> found = new java.util.LinkedHashMap<>();
    Column none = Column.of(Method.NONE);
    found.put(none, smallest(f.label(), tg, none, noLmsLo, hi, resolution, reference, out));
    long tfMin = found.get(none).mib;
    if (tfMin < 0) {
      node.put("error", "no budget up to " + hi + " MiB trains without LMS");
      return node;
    }
    tfMin = confirmed(f.label(), tg, tfMin, Math.max(1, (long) (hi * resolution)), reference,
        node, out);
    found.get(none).mib = tfMin;
    List<Column> rest = new ArrayList<>();
    TF_MODES.subList(1, TF_MODES.size()).forEach(m -> rest.add(Column.of(m)));
    LMS_MODES.forEach(m -> rest.add(Column.of(m)));
    rest.add(Column.probed(Method.AUTO));
    // swap as users run it too: where its own plans and tflms's are both kept with the allocator
    // check's warning at an edge, the probe decides between them
    rest.add(Column.probed(Method.SWAP));
    if (preChanges) {
      LMS_MODES.forEach(m -> rest.add(Column.withoutPre(m)));
    }
    rest.replaceAll(c -> c.ordered(serialOrder));
    // with the rewrites before planning the floor can be far lower (an unrolled RNN's sums)
    long preFloor = preChanges ? floorAfterPre(tg) : floor;
    if (preChanges) {
      node.put("floor_after_pre_rewrites_bytes", preFloor);
    }
    final long preLo = Math.max(1, (Math.min(floor, preFloor) >> 20) / 2);
    List<Future<Probe>> futures = new ArrayList<>();
    Probe atMin = found.get(none);
    for (Column m : rest) {
      long top = tfMin;
      long from = m.method().isLms() && m.pre() ? preLo : lo;
      futures.add(pool.submit(() -> smallest(f.label(), tg, m, from, top, resolution, reference,
          atMin, out)));
    }
    for (int i = 0; i < rest.size(); i++) {
      try {
        found.put(rest.get(i), futures.get(i).get());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException(e);
      } catch (ExecutionException e) {
        throw new IOException(e.getCause());
      }
    }
    node.put("tf_min_budget_mib", tfMin);
    ArrayNode methods = node.putArray("methods");
    for (Map.Entry<Column, Probe> e : found.entrySet()) {
      Column m = e.getKey();
      Probe p = e.getValue();
      ObjectNode row = methods.addObject();
      row.put("method", m.label()).put("kind", m.method().isLms() ? "lms4j" : "tensorflow")
          .put("min_budget_mib", p.mib);
      if (m.method().isLms()) {
        row.put("pre_rewrites", m.pre());
      }
      if (p.mib > 0) {
        row.put("fraction_of_tf_min", p.mib / (double) tfMin)
            .put("measured_peak_bytes", p.measuredPeak)
            .put("losses_identical", p.identical);
        if (p.predictedPeak >= 0) {
          row.put("predicted_peak_bytes", p.predictedPeak);
        }
        if (p.planner != null) {
          row.put("planner", p.planner);
        }
        if (p.replans >= 0) {
          row.put("probe_replans", p.replans);
        }
        if (p.pre != null) {
          row.put("gradient_sums", p.pre.gradientSums())
              .put("optimizer_edges_removed", p.pre.optimizerEdgesRemoved())
              .put("sparse_updates", p.pre.sparseUpdates())
              .put("offloaded_slots", p.pre.offloadedSlots())
              .put("offloaded_slot_bytes", p.pre.offloadedBytes())
              .put("offloaded_weights", p.pre.offloadedWeights())
              .put("offloaded_weight_bytes", p.pre.offloadedWeightBytes());
        }
      } else {
        row.put("why", p.why);
      }
      say(out, "  %-16s %s", m.label(), p.mib > 0 ? String.format(Locale.ROOT,
          "%d MiB (%.2f of TF's minimum)", p.mib, p.mib / (double) tfMin) : "none: " + p.why);
    }
    return node;
  }

  /** The floor ({@link LowerBound}) of the graph after the rewrites before planning. */
  private static long floorAfterPre(TrainingGraph tg) {
    dev.lms4j.tf.OptimizerEdges.Result edges = dev.lms4j.tf.OptimizerEdges.relax(tg);
    TrainingGraph relaxed = new TrainingGraph(dev.lms4j.tf.SparseUpdates.rewrite(
        edges.graphDef(), tg.manifest().feedShapes()).graphDef(), tg.manifest());
    TrainingGraph summed = new TrainingGraph(dev.lms4j.tf.GradientSums.rewrite(relaxed,
        dev.lms4j.tf.GradientSums.Options.defaults()).graphDef(), tg.manifest());
    return LowerBound.of(GraphImporter.importGraph(summed.graphDef(),
        tg.manifest().feedShapes(), -1, GraphImporter.DEFAULT_BACKWARD_SCOPE,
        tg.manifest().runOps()));
  }

  /** Whether the rewrites before planning change the graph. */
  private static boolean preRewritesChange(TrainingGraph tg, DataflowGraph model) {
    if (!dev.lms4j.tf.GradientSums.chains(model, dev.lms4j.tf.GradientSums.Options.defaults())
        .isEmpty()) {
      return true;
    }
    return dev.lms4j.tf.OptimizerEdges.relax(tg).changed()
        || dev.lms4j.tf.SparseUpdates.rewrite(tg.graphDef(), tg.manifest().feedShapes())
            .changed();
  }

  /** The outcome of one method's search. */
  static final class Probe {
    long mib = -1;
    long predictedPeak = -1;
    long measuredPeak = -1;
    boolean identical;
    String planner;
    LmsResult.PreRewrites pre;
    String why = "";
    /** lms4j left the graph as given: the very graph TensorFlow's minimum was found with. */
    boolean asGiven;
    /** TensorFlow's confirmed result was taken for it ({@link #asGiven}, at its minimum). */
    boolean tookTfResult;
    /** For a probed column: the re-plans the probe made (-1 otherwise). */
    int replans = -1;
  }

  /**
   * TensorFlow's minimum, confirmed: the executor's order varies between runs (two inter-op
   * threads), and with it where the BFC allocator puts each chunk, so a budget at the edge trains
   * in some runs and not in others (embedding-dense at 118 MiB: 4 of 6 runs). The bisected
   * budget must train {@link #CONFIRM_RUNS} more times in a row; where it does not, it moves up
   * one bisection step (at most 4 times), and the budgets that failed a repeat are recorded as
   * {@code tf_min_unstable_mib}.
   */
  private static long confirmed(String family, TrainingGraph tg, long min, long step,
      double[] reference, ObjectNode node, PrintStream out) throws IOException {
    long mib = min;
    for (int up = 0; up <= 4; up++) {
      int trained = 0;
      while (trained < CONFIRM_RUNS && attempt(tg, Method.NONE, mib, reference).mib > 0) {
        trained++;
      }
      if (trained == CONFIRM_RUNS) {
        say(out, "  %-18s %-16s %5d MiB: trained %d more times", family, Method.NONE.label,
            mib, CONFIRM_RUNS);
        return mib;
      }
      say(out, "  %-18s %-16s %5d MiB: OOM in repeat %d: not a stable minimum", family,
          Method.NONE.label, mib, trained + 1);
      (node.has("tf_min_unstable_mib") ? (ArrayNode) node.get("tf_min_unstable_mib")
          : node.putArray("tf_min_unstable_mib")).add(mib);
      mib += step;
    }
    return mib;
  }

  /** The smallest MiB in {@code (lo, hi]} at which {@code m} trains (bisection). */
  private static Probe smallest(String family, TrainingGraph tg, Column m, long lo, long hi,
      double resolution, double[] reference, PrintStream out) throws IOException {
    return smallest(family, tg, m, lo, hi, resolution, reference, null, out);
  }

  /**
   * As above; {@code tfMin} (null while TensorFlow's own minimum is searched) is TensorFlow's
   * confirmed minimum: where an lms4j mode leaves the graph as given at that budget or above, it
   * hands back the very graph that trained there {@link #CONFIRM_RUNS} + 1 times, so that result
   * is its result (a budget at the edge flips between runs of one graph: embedding-dense at 118
   * MiB trained 4 times without LMS and ran out of memory once as tflms's unchanged output).
   */
  private static Probe smallest(String family, TrainingGraph tg, Column m, long lo, long hi,
      double resolution, double[] reference, Probe tfMin, PrintStream out) throws IOException {
    Probe best = new Probe();
    long step = Math.max(1, (long) (hi * resolution));
    Bisection.Edge e = Bisection.search(lo, hi, step, mib -> {
      Probe p = attempt(tg, m, mib, reference, tfMin);
      say(out, "  %-18s %-16s %5d MiB: %s", family, m.label(), mib,
          p.mib > 0 ? (p.tookTfResult ? "trains (graph as given: TensorFlow's confirmed "
              + "minimum)" : p.asGiven ? "trains (graph as given)" : "trains") : p.why);
      if (p.mib > 0) {
        synchronized (best) {
          if (best.mib < 0 || p.mib < best.mib) {
            best.mib = p.mib;
            best.predictedPeak = p.predictedPeak;
            best.measuredPeak = p.measuredPeak;
            best.identical = p.identical;
            best.planner = p.planner;
            best.pre = p.pre;
            best.replans = p.replans;
          }
        }
        return true;
      }
      if (mib == hi) {
        best.why = "does not train at TensorFlow's own minimum (" + hi + " MiB): " + p.why;
      }
      return false;
    });
    if (e.fits() < 0 && best.why.isEmpty()) {
      best.why = "no budget found";
    }
    return best;
  }

  private static Probe attempt(TrainingGraph tg, Method m, long mib, double[] reference)
      throws IOException {
    return attempt(tg, Column.of(m), mib, reference, null);
  }

  static Probe attempt(TrainingGraph tg, Column c, long mib, double[] reference,
      Probe tfMin) throws IOException {
    Method m = c.method();
    Probe p = new Probe();
    long budget = mib << 20;
    TrainingGraph run = tg;
    if (m.isLms() && c.probe()) {
      Lms lms = Lms.builder().budget(budget).mode(m.mode).serialOrder(c.ordered()).build();
      dev.lms4j.tf.run.Probe.Outcome o = dev.lms4j.tf.run.Probe.closeLoop(tg, lms,
          dev.lms4j.tf.run.Probe.Options.of(budget, lms));
      if (!o.trains()) {
        p.why = "probe: " + o.verdict().name().toLowerCase(Locale.ROOT) + " ("
            + firstLine(o.message()) + ")";
        return p;
      }
      run = new TrainingGraph(o.graphDef(), tg.manifest());
      p.predictedPeak = o.result().predictedPeakAfter();
      p.planner = o.result().planner() == null ? "as given" : o.result().planner();
      p.replans = o.replans();
    } else if (m.isLms()) {
      try {
        Lms lms = Lms.builder().budget(budget).mode(m.mode).gradientSums(c.pre())
            .optimizerEdges(c.pre()).sparseUpdates(c.pre()).slotOffload(c.pre())
            .weightOffload(c.pre())
            .serialOrder(c.ordered()).build();
        LmsResult lr = lms.rewrite(tg);
        run = new TrainingGraph(lr.graphDef(), tg.manifest());
        p.predictedPeak = lr.predictedPeakAfter();
        p.planner = lr.planner();
        p.pre = lr.preRewrites().changed() ? lr.preRewrites() : null;
        p.asGiven = lr.graphDef().equals(tg.graphDef());
        if (p.asGiven && tfMin != null && mib >= tfMin.mib && m.memOpt == Method.NONE.memOpt) {
          p.mib = mib;
          p.measuredPeak = tfMin.measuredPeak;
          p.identical = tfMin.identical;
          p.tookTfResult = true;
          return p;
        }
      } catch (PlanningException e) {
        p.why = "no plan (" + firstLine(e.getMessage()) + ")";
        return p;
      } catch (RuntimeException e) {
        p.why = "planner failed (" + e.getClass().getSimpleName() + ": "
            + firstLine(e.getMessage()) + ")";
        LOG.warn("{} at {} MiB: planner failed", c.label(), mib, e);
        return p;
      }
    }
    RunResult r = BudgetedRunner.run(run, options(budget, m));
    if (!r.fits()) {
      p.why = r.oom() ? "OOM" : "failed (" + firstLine(r.error()) + ")";
      return p;
    }
    p.mib = mib;
    p.measuredPeak = r.peakBytes();
    p.identical = Arrays.equals(r.losses(), Arrays.copyOf(reference, r.losses().length));
    return p;
  }

  private static BudgetedRunner.Options options(long budget, Method m) {
    return new BudgetedRunner.Options(budget, STEPS, 42, true, m.memOpt, Duration.ofMinutes(5));
  }

  /** The Markdown table of a result. */
  public static String markdown(ObjectNode root) {
    StringBuilder md = new StringBuilder();
    md.append("# Corpus benchmark (").append(root.path("size").asText()).append(" size)\n\n")
        .append("Command: `").append(root.path("command").asText()).append("`; machine: ")
        .append(root.path("machine").asText()).append("; ")
        .append(String.format(Locale.ROOT, "%.1f", root.path("wall_seconds").asDouble() / 60))
        .append(" min.\n\n")
        .append("Smallest budget that trains (init + ").append(root.path("steps_per_probe")
            .asInt()).append(" steps in a worker JVM under the BFC limit), bisected within ")
        .append(Math.round(root.path("resolution").asDouble() * 100))
        .append("% of TensorFlow's own minimum (a family measured at another resolution says so "
            + "in its `resolution`); lms4j modes as a fraction of TensorFlow's own "
            + "minimum (the unmodified graph, grappler's default). `=` marks losses "
            + "bit-identical to the unbudgeted run's, `!=` different. lms4j modes run with the "
            + "rewrites before planning (gradient sums as running accumulations, relaxed "
            + "optimizer edges, sparse table updates; the default); where those change a "
            + "family's graph, the modes "
            + "are measured without them too, in the same run (`(no pre-rewrites)`).\n\n");
    List<String> labels = new ArrayList<>();
    for (var f : root.path("families")) {
      for (var m : f.path("methods")) {
        String l = m.path("method").asText();
        if (!l.equals("none") && !labels.contains(l)) {
          labels.add(l);
        }
      }
    }
    md.append("| family | TF min |");
    labels.forEach(l -> md.append(' ').append(l.replace("grappler-", "grappler ")).append(" |"));
    md.append(" params | floor | predicted / measured peak (no budget) |\n|---|---|");
    labels.forEach(l -> md.append("---|"));
    md.append("---|---|---|\n");
    for (var f : root.path("families")) {
      md.append("| ").append(f.path("family").asText()).append(" | ");
      if (f.has("error")) {
        md.append(f.path("error").asText()).append(" |").append("|".repeat(labels.size() + 3))
            .append("\n");
        continue;
      }
      long tfMin = f.path("tf_min_budget_mib").asLong();
      md.append(tfMin).append(" MiB | ");
      for (String label : labels) {
        var m = method(f, label);
        if (m == null) {
          md.append("(same as with) | ");
          continue;
        }
        long mib = m.path("min_budget_mib").asLong();
        if (mib <= 0) {
          md.append(m.path("why").asText().startsWith("does not train at TensorFlow")
              ? "> 1 (fails at TF min)" : "none").append(" | ");
        } else {
          md.append(String.format(Locale.ROOT, "%.2f", mib / (double) tfMin));
          if (m.has("losses_identical")) {
            md.append(m.path("losses_identical").asBoolean() ? " =" : " !=");
          }
          md.append(" | ");
        }
      }
      md.append(String.format(Locale.ROOT, "%.1f | %.1f | %.1f / %.1f |\n",
          mib(f.path("parameter_bytes").asLong()), mib(f.path("floor_bytes").asLong()),
          mib(f.path("predicted_peak_bytes").asLong()), mib(f.path("measured_peak_bytes")
              .asLong())));
    }
    List<String> lmsLabels = new ArrayList<>();
    for (var f : root.path("families")) {
      for (var m : f.path("methods")) {
        String l = m.path("method").asText();
        if (m.path("kind").asText().equals("lms4j") && !lmsLabels.contains(l)) {
          lmsLabels.add(l);
        }
      }
    }
    md.append("\nPredicted vs measured peak at each lms4j mode's smallest budget (MiB):\n\n")
        .append("| family |");
    lmsLabels.forEach(l -> md.append(' ').append(l).append(" |"));
    md.append("\n|---|");
    lmsLabels.forEach(l -> md.append("---|"));
    md.append("\n");
    for (var f : root.path("families")) {
      if (f.has("error")) {
        continue;
      }
      md.append("| ").append(f.path("family").asText()).append(" |");
      for (String label : lmsLabels) {
        var m = method(f, label);
        if (m == null) {
          md.append(" - |");
          continue;
        }
        md.append(m.has("predicted_peak_bytes") ? String.format(Locale.ROOT, " %.1f / %.1f |",
            mib(m.path("predicted_peak_bytes").asLong()),
            mib(m.path("measured_peak_bytes").asLong())) : " - |");
      }
      md.append("\n");
    }
    md.append("\nWhy a mode has no budget:\n\n");
    for (var f : root.path("families")) {
      for (var m : f.path("methods")) {
        if (m.path("min_budget_mib").asLong() <= 0) {
          md.append("- ").append(f.path("family").asText()).append(", ")
              .append(m.path("method").asText()).append(": ").append(m.path("why").asText())
              .append("\n");
        }
      }
    }
    return md.toString();
  }

  private static com.fasterxml.jackson.databind.JsonNode method(
      com.fasterxml.jackson.databind.JsonNode family, String label) {
    for (var m : family.path("methods")) {
      if (m.path("method").asText().equals(label)) {
        return m;
      }
    }
    return null;
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "";
    }
    int nl = s.indexOf('\n');
    String line = nl < 0 ? s : s.substring(0, nl);
    return line.length() > 160 ? line.substring(0, 160) + "..." : line;
  }

  private static double mib(long bytes) {
    return bytes / 1048576.0;
  }

  private static void say(PrintStream out, String fmt, Object... args) {
    synchronized (out) {
      out.printf(Locale.ROOT, fmt + "%n", args);
    }
  }
}
