package dev.lms4j.bench;

import com.fasterxml.jackson.databind.JsonNode;
import dev.lms4j.viz.Charts;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The model benchmark's pictures, per model: step time over the budget (as a share of the no-LMS
 * smallest budget) per method, and throughput over the batch at the capacity budget per method.
 */
final class BenchPlots {
  private BenchPlots() {}

  /** Writes the plots of every model of {@code root} next to the results; returns the files. */
  static List<Path> write(JsonNode root, Path dir, String stem) throws IOException {
    List<Path> files = new ArrayList<>();
    for (JsonNode m : root.path("models")) {
      String model = m.path("model").asText();
      Map<String, double[][]> overhead = new LinkedHashMap<>();
      for (JsonNode r : m.path("methods")) {
        TreeMap<Double, Double> pts = new TreeMap<>();
        r.fields().forEachRemaining(e -> {
          if (e.getKey().startsWith("at_") && e.getValue().path("fits").asBoolean()) {
            pts.put(Double.parseDouble(e.getKey().substring(3)),
                e.getValue().path("step_ratio").asDouble());
          }
        });
        if (!pts.isEmpty()) {
          overhead.put(r.path("method").asText(), xy(pts));
        }
      }
      if (!overhead.isEmpty()) {
        Path f = dir.resolve(stem + "-" + model + "-overhead.png");
        Charts.lines(model + ": step time under a budget / unbudgeted step time",
            "budget (share of the no-LMS smallest budget)", "step time ratio", overhead, f);
        files.add(f);
      }
      Map<String, TreeMap<Double, Double>> byMethod = new LinkedHashMap<>();
      for (JsonNode p : m.path("capacity").path("throughput")) {
        byMethod.computeIfAbsent(p.path("method").asText(), k -> new TreeMap<>())
            .merge(p.path("batch").asDouble(), p.path("samples_per_s").asDouble(), Math::max);
      }
      if (!byMethod.isEmpty()) {
        Map<String, double[][]> thr = new LinkedHashMap<>();
        byMethod.entrySet().stream().sorted(Comparator.comparing(Map.Entry::getKey))
            .forEach(e -> thr.put(e.getKey(), xy(e.getValue())));
        Path f = dir.resolve(stem + "-" + model + "-throughput.png");
        Charts.lines(model + ": throughput at " + m.path("capacity").path("budget_mib").asLong()
            + " MiB (batches the capacity search ran; one timed step each)", "batch",
            "samples / s", thr, f);
        files.add(f);
      }
    }
    return files;
  }

  private static double[][] xy(TreeMap<Double, Double> pts) {
    double[][] a = new double[2][pts.size()];
    int i = 0;
    for (var e : pts.entrySet()) {
      a[0][i] = e.getKey();
      a[1][i++] = e.getValue();
    }
    return a;
  }
}
