package dev.lms4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.models.ModelZoo;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.ndarray.Shape;

/** {@link ProgressCallback} and {@link MetricsLogCallback} on a small MLP: 2 epochs of 3 steps. */
class ReportingCallbacksTest {

  @TempDir
  Path dir;

  private static TrainingGraph mlp() {
    return ModelZoo.getOrThrow("mlp").build(4,
        Map.of("layers", "1", "width", "8", "input", "6", "classes", "3"));
  }

  private static final Dataset DATA = SyntheticDataset.of(13, 2, Shape.of(6), 3);

  private static List<Logs> fit(Callback... callbacks) {
    try (Trainer t = new Trainer(mlp())) {
      return t.fit(DATA, 2, callbacks);
    }
  }

  @Test
  void plainProgressPrintsOneFinalLinePerEpochWithStepLossSpeedAndEta() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    List<Logs> history = fit(new ProgressCallback(out, false));
    String text = bytes.toString(StandardCharsets.UTF_8);

    assertThat(text).doesNotContain("\r").doesNotContain("\u001b");
    List<String> finals = text.lines().filter(l -> l.contains("step 3/3 (100%)")).toList();
    assertThat(finals).hasSizeGreaterThanOrEqualTo(2);
    String lastOfEpoch1 = last(text.lines().filter(l -> l.startsWith("epoch 1/2 ")).toList());
    String lastOfEpoch2 = last(text.lines().filter(l -> l.startsWith("epoch 2/2 ")).toList());
    assertThat(lastOfEpoch1).matches("epoch 1/2 step 3/3 \\(100%\\) loss \\d+\\.\\d{4} accuracy "
        + "\\d\\.\\d{4} \\d+ samples/s elapsed \\d:\\d\\d:\\d\\d ETA 0:00:00");
    // the final line of an epoch shows the epoch's means
    assertThat(lastOfEpoch2).contains(String.format(java.util.Locale.ROOT, "loss %.4f",
        history.get(1).loss()));
    assertThat(text.lines()).allSatisfy(l -> assertThat(l).startsWith("epoch "));
  }

  @Test
  void terminalProgressRedrawsInPlace() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    fit(new ProgressCallback(new PrintStream(bytes, true, StandardCharsets.UTF_8), true,
        Duration.ofMillis(50)));
    String text = bytes.toString(StandardCharsets.UTF_8);
    assertThat(text).contains("\r").contains("epoch 1/2").contains("epoch 2/2")
        .contains("3/3").contains("loss ");
    assertThatThrownBy(() -> new ProgressCallback(System.err, false, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("interval");
  }

  @Test
  void csvLogHasAHeaderABatchRowPerStepAndAnEpochRowPerEpoch() throws IOException {
    Path csv = dir.resolve("logs/metrics.csv");
    MetricsLogCallback log = new MetricsLogCallback(csv);
    List<Logs> history = fit(log);
    List<String> lines = Files.readAllLines(csv);

    assertThat(lines).hasSize(1 + 2 * 3 + 2);
    assertThat(lines.get(0))
        .isEqualTo("kind,epoch,step,samples,loss,accuracy,samples_per_s,elapsed_s");
    assertThat(lines.get(1)).startsWith("batch,1,1,4,");
    assertThat(lines.get(4)).startsWith("epoch,1,3,12,");
    assertThat(lines.get(8)).startsWith("epoch,2,3,12,"
        + String.format(java.util.Locale.ROOT, "%.6f", history.get(1).loss()));
    assertThat(lines).allSatisfy(l -> assertThat(l.split(",")).hasSize(8));

    // a second fit appends (no second header); a new callback replaces the file
    try (Trainer t = new Trainer(mlp())) {
      t.fit(DATA, 1, log);
      t.fit(DATA, 1, log);
    }
    // 9 lines, then 2 x (3 batch rows + 1 epoch row)
    assertThat(Files.readAllLines(csv)).hasSize(9 + 2 * 4)
        .filteredOn(l -> l.startsWith("kind")).hasSize(1);
    fit(new MetricsLogCallback(csv, MetricsLogCallback.Format.CSV, false));
    assertThat(Files.readAllLines(csv)).hasSize(1 + 2)
        .allSatisfy(l -> assertThat(l).doesNotStartWith("batch"));
  }

  @Test
  void jsonLinesLogHasOneObjectPerRow() throws IOException {
    Path jsonl = dir.resolve("metrics.jsonl");
    fit(new MetricsLogCallback(jsonl));
    ObjectMapper json = new ObjectMapper();
    List<JsonNode> rows = new ArrayList<>();
    for (String l : Files.readAllLines(jsonl)) {
      rows.add(json.readTree(l));
    }
    assertThat(rows).hasSize(8);
    JsonNode epoch = rows.get(7);
    assertThat(epoch.get("kind").asText()).isEqualTo("epoch");
    assertThat(epoch.get("epoch").asInt()).isEqualTo(2);
    assertThat(epoch.get("samples").asLong()).isEqualTo(12);
    assertThat(epoch.get("accuracy").asDouble()).isBetween(0.0, 1.0);
    assertThat(epoch.has("loss") && epoch.has("samples_per_s") && epoch.has("elapsed_s"))
        .isTrue();
    assertThat(rows.get(0).get("kind").asText()).isEqualTo("batch");
  }

  @Test
  void aFailedFitClosesTheLog() throws IOException {
    Path csv = dir.resolve("failed.csv");
    Callback failing = new Callback() {
      @Override
      public void onEpochEnd(int epoch, Logs logs) {
        throw new IllegalStateException("stop");
      }
    };
    assertThatThrownBy(() -> fit(new MetricsLogCallback(csv), failing))
        .hasMessage("stop");
    // everything up to the failure is on disk
    assertThat(Files.readAllLines(csv)).hasSize(1 + 3 + 1);
  }

  private static String last(List<String> lines) {
    assertThat(lines).isNotEmpty();
    return lines.get(lines.size() - 1);
  }
}
