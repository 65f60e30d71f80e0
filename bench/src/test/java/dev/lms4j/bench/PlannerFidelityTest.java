package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The planner fidelity suite's search, summary and table, without TensorFlow. */
class PlannerFidelityTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void walksUpFromAnUnderPredictionThenBisects() throws Exception {
    List<Long> probed = new ArrayList<>();
    // fits from 56 MiB up, predicted 50: 50 fails, +5 -> 55 fails, +6 -> 61 fits: (55, 61];
    // bisection in steps of max(1, 3% of 61) = 1: 61 (again) fits, 58 fits, 56 fits; stop
    Bisection.Edge e = PlannerFidelity.search(mib -> {
      probed.add(mib);
      return mib >= 56;
    }, new TreeMap<>(), 50);
    assertThat(probed).containsExactly(50L, 55L, 61L, 61L, 58L, 56L);
    assertThat(e).isEqualTo(new Bisection.Edge(55, 56));
  }

  @Test
  void walksDownFromAnOverPredictionThenBisects() throws Exception {
    List<Long> probed = new ArrayList<>();
    // fits from 56 MiB up, predicted 80: 80, 72, 64, 57 fit, 51 fails: (51, 57]; step 1:
    // 57 (again) fits, 54 fails, 55 fails, 56 fits
    Bisection.Edge e = PlannerFidelity.search(mib -> {
      probed.add(mib);
      return mib >= 56;
    }, new TreeMap<>(), 80);
    assertThat(probed).containsExactly(80L, 72L, 64L, 57L, 51L, 57L, 54L, 55L, 56L);
    assertThat(e).isEqualTo(new Bisection.Edge(55, 56));
  }

  @Test
  void startsFromWhatWasAlreadyProbed() throws Exception {
    List<Long> probed = new ArrayList<>();
    TreeMap<Long, Boolean> seen = new TreeMap<>();
    seen.put(60L, true); // the plan's run at its budget
    seen.put(40L, false);
    // predicted 90, but 60 is known to fit: start there (answered from what was seen) and walk
    // down: 54 fits, 48 fails (48 - 40 > 5 keeps walking until then)
    Bisection.Edge e = PlannerFidelity.search(mib -> {
      if (seen.containsKey(mib)) {
        return seen.get(mib);
      }
      probed.add(mib);
      return mib >= 50;
    }, seen, 90);
    assertThat(probed).first().isEqualTo(54L);
    assertThat(probed).doesNotContain(90L);
    assertThat(e.fits()).isEqualTo(50);
    assertThat(e.fails()).isEqualTo(49);
  }

  @Test
  void nothingUpToTheCapFits() throws Exception {
    Bisection.Edge e = PlannerFidelity.search(mib -> false, new TreeMap<>(),
        PlannerFidelity.MAX_MIB - 10);
    assertThat(e.fits()).isEqualTo(-1);
    assertThat(e.fails()).isEqualTo(PlannerFidelity.MAX_MIB);
  }

  @Test
  void everyRowFindsTheEdgeWithinTheResolution() throws Exception {
    for (long edge : new long[] {1, 2, 7, 56, 93, 240, 1000}) {
      for (long predicted : new long[] {1, edge / 2, edge, edge + 3, 2 * edge, 5 * edge}) {
        Bisection.Edge e = PlannerFidelity.search(mib -> mib >= edge, new TreeMap<>(),
            predicted);
        assertThat(e.fits()).as("edge %d from %d", edge, predicted).isGreaterThanOrEqualTo(edge);
        assertThat(e.fails()).as("edge %d from %d", edge, predicted).isLessThan(edge);
        assertThat(e.fits() - e.fails()).as("edge %d from %d", edge, predicted)
            .isLessThanOrEqualTo(Math.max(1, (long) (e.fits() * PlannerFidelity.RESOLUTION)));
      }
    }
  }

  private static ObjectNode row(ArrayNode rows, String mode, long predicted, long real) {
    ObjectNode r = rows.addObject().put("graph", "g").put("mode", mode)
        .put("predicted_mib", predicted);
    if (real != 0) {
      r.put("real_min_mib", real);
    }
    if (real > 0) {
      r.put("error", (double) predicted / real - 1);
    }
    if (!mode.equals("none")) {
      r.put("fraction", 0.6).put("budget_mib", 60);
    }
    return r;
  }

  @Test
  void summaryCountsErrorsPlansAndTheProbe() {
    ObjectNode root = JSON.createObjectNode().put("command", "c").put("machine", "m")
        .put("steps", 2).put("fractions", "[0.6, 0.85]").put("modes", "[tflms, auto]")
        .put("resolution", 0.03).put("step", 0.1).put("wall_seconds", 600)
        .put("worker_runs", 40).put("defaults", "[g, h]");
    ArrayNode rows = root.putArray("rows");
    row(rows, "none", 88, 102); // -13.7%
    // +2.0%, predicted above its 60 MiB budget
    row(rows, "tflms", 100, 98).put("planner", "tflms-swap").put("no_probe", "oom")
        .put("probe", "replanned").put("replans", 1).put("after_probe", "trains");
    row(rows, "swap", 50, 50).put("planner", "hybrid").put("no_probe", "trains") // 0%
        .put("probe", "accepted").put("replans", 0).put("after_probe", "trains");
    row(rows, "remat", 60, 66).put("planner", "grappler-recompute") // -9.1%
        .put("bisection_of", "g swap@60")
        .put("no_probe", "trains").put("probe", "accepted").put("replans", 0)
        .put("after_probe", "oom");
    rows.addObject().put("graph", "g").put("mode", "auto").put("fraction", 0.6)
        .put("budget_mib", 60).put("planner", "refused").put("refusal", "A budget of 60 MiB "
            + "cannot work: at least 70 MiB").put("no_probe", "refused").put("probe", "refused")
        .put("replans", 2).put("after_probe", "-");

    PlannerFidelity.Summary s = PlannerFidelity.summary(root);
    // |errors| 0, 2/98, 6/66, 14/102: median (2/98 + 6/66) / 2
    assertThat(s).usingRecursiveComparison().ignoringFields("medianAbs").isEqualTo(
        new PlannerFidelity.Summary(5, 4, 2, 3, 0, 1, 2, 3, 1, 1, 3, 1, 3));
    assertThat(s.medianAbs()).isCloseTo((2.0 / 98 + 6.0 / 66) / 2, org.assertj.core.data.Offset
        .offset(1e-9));

    String md = PlannerFidelity.markdown(root);
    assertThat(md)
        .contains("| every row | 5 | 4 | 2 | 3 | 5.6% | 1 / 2 | 3 | 1 | 1 | 3 | 1 | 3 |")
        // the remat row reused the swap row's bisection: left out, |errors| 0, 2/98, 14/102
        .contains("| each bisected graph once | 4 | 3 | 2 | 2 | 2.0% | 1 / 1 | 2 | 1 | 1 | 2 | 0 "
            + "| 3 |")
        .contains("Not measured in this run (of the default graphs): h.")
        .contains("| g | no LMS | - | - | 88 MiB | 102 MiB | -13.7% | - | - | - |")
        .contains("| g | tflms @ 60% | 60 MiB | tflms-swap | 100 MiB | 98 MiB | +2.0% | oom | "
            + "replanned (1) | trains |")
        .contains("| g | auto @ 60% | 60 MiB | refused: A budget of 60 MiB cannot work: at least "
            + "70 MiB | - | - | - | refused | refused (2) | - |")
        .contains("10.0 min, 40 worker runs");
  }
}
