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
import dev.lms4j.train.corpus.Corpus;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * {@code lms4j bench --suite acceptance}: does a plan {@code lms4j} accepts really train under
 * its budget? For every graph, at budgets that are fractions of what the allocator model says the
 * graph as given needs, and at two memory ratios, {@code auto} plans (with the allocator check),
 * and the plan runs init and two steps in a budgeted worker:
 *
 * <ul>
 *   <li><b>without the probe</b> ({@code Lms.rewrite} as a Java user calls it): trains, or runs
 *       out of memory (an accepted plan that fails: what the memory model misses);</li>
 *   <li><b>with the probe</b> ({@code run}'s and {@code train}'s default,
 *       {@link Probe#closeLoop}): its verdict and re-plans, then the graph it hands back runs
 *       again under the budget: an accepted budget must never run out of memory later.</li>
 * </ul>
 *
 * <pre>{@code
 * ObjectNode r = Acceptance.run(Acceptance.defaults(), Path.of("docs/bench"), System.out);
 * }</pre>
 */
public final class Acceptance {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int STEPS = 2;
  /** Budgets as fractions of the allocator model's need for the graph as given. */
  static final double[] FRACTIONS = {0.6, 0.85};
  /** The memory ratios compared: today's default and the aim. */
  static final double[] RATIOS = {0.8, 0.95};

  private Acceptance() {}

  /** The default graphs: three zoo models and every corpus family at the bench size. */
  public static List<Fidelity.Case> defaults() {
    List<Fidelity.Case> cases = new ArrayList<>(List.of(Fidelity.zoo("lenet", 100),
        Fidelity.zoo("resnet", 32), Fidelity.zoo("gpt2", 4)));
    for (Corpus.Family f : Corpus.families()) {
      cases.add(Fidelity.corpus(f.label(), Corpus.Size.BENCH));
    }
    return cases;
  }

  /**
   * Measures the cases; writes {@code acceptance.json} and {@code acceptance.md} under
   * {@code outDir} after every graph.
   */
  public static ObjectNode run(List<Fidelity.Case> cases, Path outDir, PrintStream out)
      throws IOException {
    Files.createDirectories(outDir);
    ObjectNode root = JSON.createObjectNode();
    root.put("schema", "lms4j-bench-acceptance/1").put("suite", "acceptance")
        .put("machine", Machine.describe())
        .put("command", Fidelity.command("acceptance", cases, defaults()))
        .put("steps", STEPS).put("fractions", java.util.Arrays.toString(FRACTIONS))
        .put("ratios", java.util.Arrays.toString(RATIOS));
    ArrayNode rows = root.putArray("rows");
    long t0 = System.nanoTime();
    for (Fidelity.Case c : cases) {
      TrainingGraph tg = c.build().get();
      DataflowGraph g = Fidelity.model(tg);
      long need = BfcReplay.smallestMib(g, Levels.of(g).schedule(), 1L << 16);
      for (double f : FRACTIONS) {
        long mib = Math.max(1, Math.round(need * f));
        for (double ratio : RATIOS) {
          ObjectNode row = measure(c.label(), tg, need, f, mib, ratio);
          rows.add(row);
          out.println(line(row));
          root.put("wall_seconds", (System.nanoTime() - t0) / 1e9);
          write(root, outDir);
        }
      }
    }
    out.println(markdown(root));
    return root;
  }

  private static ObjectNode measure(String label, TrainingGraph tg, long needMib, double fraction,
      long mib, double ratio) throws IOException {
    long budget = mib << 20;
    ObjectNode row = JSON.createObjectNode().put("graph", label).put("need_mib", needMib)
        .put("fraction", fraction).put("budget_mib", mib).put("mem_ratio", ratio);
    Lms lms = Lms.builder().budget(budget).memRatio(ratio).mode(LmsMode.AUTO).build();
    try {
      LmsResult plan = lms.rewrite(tg);
      row.put("planner", plan.planner() == null ? "none" : plan.planner())
          .put("predicted_mib", plan.predictedPeakAfter() / 1048576.0);
      RunResult r = BudgetedRunner.run(new TrainingGraph(plan.graphDef(), tg.manifest()),
          BudgetedRunner.Options.of(budget, STEPS));
      row.put("no_probe", outcome(r));
      if (!r.fits()) {
        row.put("no_probe_error", r.error());
      }
    } catch (PlanningException e) {
      row.put("planner", "refused").put("no_probe", "refused").put("refusal", e.getMessage());
    }
    Probe.Outcome o = Probe.closeLoop(tg, lms,
        Probe.Options.of(budget, ratio));
    row.put("probe", o.verdict().name().toLowerCase(Locale.ROOT)).put("replans", o.replans())
        .put("probes", o.attempts().size());
    boolean trains = o.verdict() == Probe.Verdict.ACCEPTED
        || o.verdict() == Probe.Verdict.REPLANNED || o.verdict() == Probe.Verdict.UNMODIFIED;
    if (trains) {
      RunResult after = BudgetedRunner.run(new TrainingGraph(o.graphDef(), tg.manifest()),
          BudgetedRunner.Options.of(budget, STEPS));
      row.put("after_probe", outcome(after));
      if (!after.fits()) {
        row.put("after_probe_error", after.error());
      }
    } else {
      row.put("after_probe", "-").put("probe_message", o.message());
    }
    return row;
  }

  private static String outcome(RunResult r) {
    return r.fits() ? "trains" : r.oom() ? "oom" : "failed";
  }

  private static String line(JsonNode r) {
    return String.format(Locale.ROOT, "  %s at %d MiB (%.2f of %d), ratio %.2f: %s -> %s; probe %s"
        + " (%d re-plans) -> %s", r.path("graph").asText(), r.path("budget_mib").asLong(),
        r.path("fraction").asDouble(), r.path("need_mib").asLong(),
        r.path("mem_ratio").asDouble(), r.path("planner").asText(), r.path("no_probe").asText(),
        r.path("probe").asText(), r.path("replans").asInt(), r.path("after_probe").asText());
  }

  private static void write(ObjectNode root, Path outDir) throws IOException {
    Files.writeString(outDir.resolve("acceptance.json"),
        JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    Files.writeString(outDir.resolve("acceptance.md"), markdown(root));
  }

  /** What a run found, counted per memory ratio. */
  record Summary(double ratio, int rows, int accepted, int acceptedOom, int refused,
      int probeTrains, int afterProbeOom, int replans) {}

  static List<Summary> summaries(JsonNode root) {
    List<Summary> out = new ArrayList<>();
    for (double ratio : ratios(root)) {
      int rows = 0;
      int accepted = 0;
      int acceptedOom = 0;
      int refused = 0;
      int probeTrains = 0;
      int afterOom = 0;
      int replans = 0;
      for (JsonNode r : root.path("rows")) {
        if (r.path("mem_ratio").asDouble() != ratio) {
          continue;
        }
        rows++;
        String np = r.path("no_probe").asText();
        if (np.equals("refused")) {
          refused++;
        } else {
          accepted++;
          if (!np.equals("trains")) {
            acceptedOom++;
          }
        }
        if (r.path("after_probe").asText().equals("trains")) {
          probeTrains++;
        } else if (!r.path("after_probe").asText().equals("-")) {
          afterOom++;
        }
        replans += r.path("replans").asInt();
      }
      out.add(new Summary(ratio, rows, accepted, acceptedOom, refused, probeTrains, afterOom,
          replans));
    }
    return out;
  }

  private static List<Double> ratios(JsonNode root) {
    List<Double> rs = new ArrayList<>();
    for (JsonNode r : root.path("rows")) {
      double x = r.path("mem_ratio").asDouble();
      if (!rs.contains(x)) {
        rs.add(x);
      }
    }
    return rs;
  }

  /** The Markdown of a result. */
  public static String markdown(JsonNode root) {
    StringBuilder md = new StringBuilder("# Acceptance: do accepted plans train?\n\n");
    if (root.hasNonNull("notes")) {
      md.append(root.path("notes").asText()).append("\n\n## Results\n\n");
    }
    md.append(String.format(Locale.ROOT, "Command: `%s`; machine: %s; %.1f min.%n%n",
        root.path("command").asText(), root.path("machine").asText(),
        root.path("wall_seconds").asDouble() / 60));
    md.append("Per graph, budgets at ").append(root.path("fractions").asText())
        .append(" of what the allocator model (`BfcReplay`) says the graph as given needs; ")
        .append("`auto` (allocator check on) plans at each memory ratio; the plan runs init and ")
        .append(root.path("steps").asInt()).append(" steps in a budgeted worker **without** the ")
        .append("probe (as `Lms.rewrite` hands it to a Java user), then **with** it (`run`'s and ")
        .append("`train`'s default: `Probe.closeLoop`), and the graph the probe hands back runs ")
        .append("again under the budget.\n\n");
    md.append("| memory ratio | rows | plans accepted | of them out of memory without the probe "
        + "| refused | with the probe: trains | out of memory after the probe accepted | "
        + "re-plans |\n|---|---|---|---|---|---|---|---|\n");
    for (Summary s : summaries(root)) {
      md.append(String.format(Locale.ROOT, "| %.2f | %d | %d | %d | %d | %d | %d | %d |%n",
          s.ratio(), s.rows(), s.accepted(), s.acceptedOom(), s.refused(), s.probeTrains(),
          s.afterProbeOom(), s.replans()));
    }
    md.append("\n| graph | need | budget | ratio | plan | without probe | probe (re-plans) | "
        + "after probe |\n|---|---|---|---|---|---|---|---|\n");
    for (JsonNode r : root.path("rows")) {
      String plan = r.path("planner").asText();
      if (r.has("predicted_mib")) {
        plan += String.format(Locale.ROOT, " (%.1f MiB)", r.path("predicted_mib").asDouble());
      }
      md.append(String.format(Locale.ROOT, "| %s | %d MiB | %d MiB (%.2f) | %.2f | %s | %s | "
          + "%s (%d) | %s |%n", r.path("graph").asText(), r.path("need_mib").asLong(),
          r.path("budget_mib").asLong(), r.path("fraction").asDouble(),
          r.path("mem_ratio").asDouble(), plan, r.path("no_probe").asText(),
          r.path("probe").asText(), r.path("replans").asInt(), r.path("after_probe").asText()));
    }
    return md.toString();
  }
}
