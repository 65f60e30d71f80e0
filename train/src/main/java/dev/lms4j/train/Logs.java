package dev.lms4j.train;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * What a batch, an epoch or an evaluation measured: the mean loss, the mean of each metric of the
 * manifest (e.g. {@code accuracy}), the number of samples and the throughput.
 *
 * <pre>{@code
 * Logs test = trainer.evaluate(FashionMnist.test(dir));
 * double accuracy = test.metric("accuracy");
 * }</pre>
 *
 * @param loss             the mean loss
 * @param metrics          metric name to mean value, in manifest order (copied, unmodifiable)
 * @param samples          the number of samples the values are over
 * @param samplesPerSecond samples processed per second of wall time
 */
public record Logs(double loss, Map<String, Double> metrics, long samples,
    double samplesPerSecond) {

  /**
   * Copies the metrics and checks the counts.
   *
   * @param loss             the mean loss
   * @param metrics          metric name to mean value
   * @param samples          the number of samples, at least 0
   * @param samplesPerSecond the throughput
   */
  public Logs {
    Objects.requireNonNull(metrics, "metrics");
    metrics = Collections.unmodifiableMap(new LinkedHashMap<>(metrics));
    if (samples < 0) {
      throw new IllegalArgumentException("samples must be >= 0, got " + samples);
    }
  }

  /**
   * One metric's value.
   *
   * @param name the metric name, e.g. {@code accuracy}
   * @return its value
   * @throws IllegalArgumentException naming the known metrics when there is none by that name
   */
  public double metric(String name) {
    Double v = metrics.get(name);
    if (v == null) {
      throw new IllegalArgumentException("no metric '" + name + "' (metrics: "
          + (metrics.isEmpty() ? "none; the manifest names no \"metrics\"" : metrics.keySet())
          + ")");
    }
    return v;
  }

  /**
   * A one-line summary, e.g. {@code loss 0.4321 accuracy 0.8812 2345 samples/s}.
   *
   * @return the summary
   */
  public String summary() {
    StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "loss %.4f", loss));
    metrics.forEach((k, v) -> sb.append(String.format(Locale.ROOT, " %s %.4f", k, v)));
    sb.append(String.format(Locale.ROOT, " %.0f samples/s", samplesPerSecond));
    return sb.toString();
  }
}
