package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The acceptance suite's counts and table, from rows as a run writes them. */
class AcceptanceMarkdownTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static ObjectNode row(ArrayNode rows, double ratio, String planner, String noProbe,
      String probe, int replans, String after) {
    ObjectNode r = rows.addObject().put("graph", "g").put("need_mib", 100).put("fraction", 0.6)
        .put("budget_mib", 60).put("mem_ratio", ratio).put("planner", planner)
        .put("no_probe", noProbe).put("probe", probe).put("replans", replans)
        .put("after_probe", after);
    if (!planner.equals("refused")) {
      r.put("predicted_mib", 48.25);
    }
    return r;
  }

  @Test
  void countsAcceptedPlansThatRunOutOfMemoryWithAndWithoutTheProbePerRatio() {
    ObjectNode root = JSON.createObjectNode().put("command", "./lms4j bench --suite acceptance")
        .put("machine", "m").put("steps", 2).put("fractions", "[0.6, 0.85]")
        .put("wall_seconds", 120);
    ArrayNode rows = root.putArray("rows");
    row(rows, 0.8, "hybrid", "trains", "accepted", 0, "trains");
    row(rows, 0.8, "tflms-swap", "oom", "replanned", 1, "trains");
    row(rows, 0.8, "refused", "refused", "refused", 0, "-");
    row(rows, 0.95, "hybrid", "oom", "replanned", 2, "oom");
    row(rows, 0.95, "none", "trains", "unmodified", 0, "trains");

    List<Acceptance.Summary> s = Acceptance.summaries(root);
    assertThat(s).containsExactly(new Acceptance.Summary(0.8, 3, 2, 1, 1, 2, 0, 1),
        new Acceptance.Summary(0.95, 2, 2, 1, 0, 1, 1, 2));
    String md = Acceptance.markdown(root);
    assertThat(md).contains("| 0.80 | 3 | 2 | 1 | 1 | 2 | 0 | 1 |")
        .contains("| 0.95 | 2 | 2 | 1 | 0 | 1 | 1 | 2 |")
        .contains("| g | 100 MiB | 60 MiB (0.60) | 0.80 | tflms-swap (48.3 MiB) | oom | "
            + "replanned (1) | trains |")
        .contains("| g | 100 MiB | 60 MiB (0.60) | 0.80 | refused | refused | refused (0) | - |")
        .contains("2.0 min");
  }
}
