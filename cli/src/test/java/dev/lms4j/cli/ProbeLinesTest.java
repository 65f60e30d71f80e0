package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.lms4j.core.report.Report;
import dev.lms4j.tf.run.Probe;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What the command line prints and reports of a probe at the edge of its budget: the run under
 * the tighter limit and how it went (the corpus densenet at 25 MiB, 2026-12-01: a plan traced
 * 24.9 MiB and ran out of memory under 24).
 */
class ProbeLinesTest {
  private static final long MIB = 1 << 20;

  private static Probe.Outcome refusedAtTheEdge() {
    Probe.Attempt oom = new Probe.Attempt(1, "plan", "tflms-swap", 0.95, 22 * MIB, false, true,
        -1, 8 * MIB, "OOM under a budget of 25 MiB", -1, false);
    Probe.Attempt edge = new Probe.Attempt(2, "plan", "tflms-swap", 0.877, 22 * MIB, true,
        false, 25 * MIB - MIB / 10, -1, null, 24 * MIB, false);
    return new Probe.Outcome(Probe.Verdict.REFUSED, null, List.of(oom, edge), 1, 26 * MIB,
        "A budget of 25 MiB cannot work");
  }

  @Test
  void eachProbeLineSaysHowTheRunUnderTheTighterLimitWent() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Pipeline.printProbe(refusedAtTheEdge(), new PrintStream(bytes, true, StandardCharsets.UTF_8));
    List<String> lines = bytes.toString(StandardCharsets.UTF_8).lines().toList();
    assertThat(lines).hasSize(2);
    assertThat(lines.get(0)).startsWith("Probe 1 (tflms-swap plan at memory ratio 0.950)")
        .contains("ran out of memory allocating 8.0 MiB").doesNotContain("under");
    assertThat(lines.get(1)).startsWith("Probe 2 (tflms-swap plan at memory ratio 0.877)")
        .endsWith("measured peak 24.9 MiB; under 24.0 MiB it does not train");
  }

  @Test
  void theReportCarriesTheTighterLimitOnlyWhereOneWasRun() {
    Report r = new Report("densenet", 16, 25 * MIB, "auto");
    Reports.probe(r, refusedAtTheEdge());
    JsonNode attempts = r.json().get("probe").get("attempts");
    assertThat(attempts.get(0).has("tighter_limit_bytes")).isFalse();
    assertThat(attempts.get(1).get("tighter_limit_bytes").asLong()).isEqualTo(24 * MIB);
    assertThat(attempts.get(1).get("tighter_fits").asBoolean()).isFalse();
    assertThat(r.json().get("probe").get("smallest_budget_bytes").asLong()).isEqualTo(26 * MIB);
  }

  /**
   * The plot's target line is the ratio of the plan drawn: the last probe attempt that ran
   * under the budget (0.877 here, a re-plan below the probe's first 0.95), else the options'.
   */
  @Test
  void thePlotsTargetIsTheRatioOfTheAttemptThatRan() {
    AnalyzeCommand cmd = new AnalyzeCommand();
    new picocli.CommandLine(cmd).parseArgs("--model", "mlp", "--budget", "25MiB", "--lms",
        "auto");
    Report probed = new Report("densenet", 16, 25 * MIB, "auto");
    Reports.probe(probed, refusedAtTheEdge());
    assertThat(Plots.planRatio(probed, cmd.lms)).isEqualTo(0.877);
    Report unprobed = new Report("densenet", 16, 25 * MIB, "auto");
    assertThat(Plots.planRatio(unprobed, cmd.lms)).isEqualTo(cmd.lms.effectiveMemRatio())
        .isEqualTo(dev.lms4j.core.plan.Budget.DEFAULT_MEM_RATIO);
  }
}
