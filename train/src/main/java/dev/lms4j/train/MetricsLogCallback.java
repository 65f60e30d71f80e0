package dev.lms4j.train;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * Writes one row per step and/or per epoch to a file, as CSV or as JSON lines.
 *
 * <pre>{@code
 * trainer.fit(train, 5, new MetricsLogCallback(Path.of("metrics.csv")));
 * }</pre>
 *
 * Columns (CSV header, or JSON keys): {@code kind} ({@code batch} or {@code epoch}),
 * {@code epoch}, {@code step} (the step within the epoch; for epoch rows the number of steps),
 * {@code samples}, {@code loss}, one column per metric (e.g. {@code accuracy}),
 * {@code samples_per_s} and {@code elapsed_s} (seconds since the fit call began):
 *
 * <pre>
 * kind,epoch,step,samples,loss,accuracy,samples_per_s,elapsed_s
 * batch,1,1,100,2.302585,0.090000,2510.2,0.040
 * epoch,1,600,60000,0.512345,0.815400,3012.7,19.915
 * </pre>
 *
 * The file is replaced by the first {@code fit} this callback sees and appended to by later
 * ones; rows are flushed at every epoch end and the file is closed when the fit ends (normally
 * or not). Write errors surface as {@link UncheckedIOException}.
 */
public final class MetricsLogCallback implements Callback {

  /** The file format. */
  public enum Format {
    /** Comma-separated values with a header line. */
    CSV,
    /** One JSON object per line. */
    JSON_LINES
  }

  private static final ObjectMapper JSON = new ObjectMapper();

  private final Path file;
  private final Format format;
  private final boolean batches;
  private BufferedWriter writer;
  private boolean started;
  private boolean headerWritten;
  private List<String> metricNames;
  private int epoch;
  private int stepsInEpoch;
  private long fitStart;

  /**
   * Per-batch and per-epoch rows; CSV when the name ends in {@code .csv}, JSON lines otherwise.
   *
   * @param file the file to write
   */
  public MetricsLogCallback(Path file) {
    this(file, file.getFileName() != null
        && file.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(".csv")
        ? Format.CSV : Format.JSON_LINES, true);
  }

  /**
   * A metrics log.
   *
   * @param file    the file to write
   * @param format  CSV or JSON lines
   * @param batches true for a row per step as well as per epoch, false for epoch rows only
   */
  public MetricsLogCallback(Path file, Format format, boolean batches) {
    this.file = Objects.requireNonNull(file, "file");
    this.format = Objects.requireNonNull(format, "format");
    this.batches = batches;
  }

  /**
   * The file written.
   *
   * @return the path
   */
  public Path file() {
    return file;
  }

  /**
   * Opens the file (replaced the first time, appended to later).
   *
   * @param info the fit's plan
   */
  @Override
  public void onTrainBegin(FitInfo info) {
    close();
    try {
      Path parent = file.toAbsolutePath().getParent();
      if (parent != null) {
        Files.createDirectories(parent);
      }
      writer = started
          ? Files.newBufferedWriter(file, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
              StandardOpenOption.APPEND)
          : Files.newBufferedWriter(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot open the metrics log " + file, e);
    }
    started = true;
    fitStart = System.nanoTime();
  }

  /**
   * Remembers the epoch number for the batch rows.
   *
   * @param epoch the epoch number
   */
  @Override
  public void onEpochBegin(int epoch) {
    this.epoch = epoch;
  }

  /**
   * Writes a batch row (when batch rows are on).
   *
   * @param batch the step within the epoch
   * @param logs  the step's logs
   */
  @Override
  public void onBatchEnd(int batch, Logs logs) {
    if (batches) {
      row("batch", batch, logs);
    }
  }

  /**
   * Writes an epoch row and flushes.
   *
   * @param epoch the epoch number
   * @param logs  the epoch's logs
   */
  @Override
  public void onEpochEnd(int epoch, Logs logs) {
    this.epoch = epoch;
    row("epoch", -1, logs);
    try {
      if (writer != null) {
        writer.flush();
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the metrics log " + file, e);
    }
  }

  /**
   * Closes the file.
   *
   * @param logs the last epoch's logs
   */
  @Override
  public void onTrainEnd(Logs logs) {
    close();
  }

  /**
   * Closes the file.
   *
   * @param cause why training stopped
   */
  @Override
  public void onTrainAborted(Throwable cause) {
    close();
  }

  private void row(String kind, int step, Logs logs) {
    if (writer == null) {
      return;
    }
    if (step > 0) {
      stepsInEpoch = step;
    }
    int s = step > 0 ? step : stepsInEpoch;
    double elapsed = (System.nanoTime() - fitStart) / 1e9;
    if (metricNames == null) {
      metricNames = new ArrayList<>(logs.metrics().keySet());
    }
    try {
      if (format == Format.CSV) {
        if (!headerWritten) {
          headerWritten = true;
          writer.write("kind,epoch,step,samples,loss," + String.join(",", metricNames)
              + (metricNames.isEmpty() ? "" : ",") + "samples_per_s,elapsed_s\n");
        }
        StringBuilder sb = new StringBuilder();
        sb.append(kind).append(',').append(epoch).append(',').append(s).append(',')
            .append(logs.samples()).append(',').append(num(logs.loss(), 6));
        for (String m : metricNames) {
          Double v = logs.metrics().get(m);
          sb.append(',').append(v == null ? "" : num(v, 6));
        }
        sb.append(',').append(num(logs.samplesPerSecond(), 1)).append(',')
            .append(num(elapsed, 3)).append('\n');
        writer.write(sb.toString());
      } else {
        ObjectNode n = JSON.createObjectNode();
        n.put("kind", kind).put("epoch", epoch).put("step", s).put("samples", logs.samples())
            .put("loss", logs.loss());
        for (Map.Entry<String, Double> e : logs.metrics().entrySet()) {
          n.put(e.getKey(), e.getValue());
        }
        n.put("samples_per_s", logs.samplesPerSecond()).put("elapsed_s", elapsed);
        writer.write(JSON.writeValueAsString(n));
        writer.write('\n');
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the metrics log " + file, e);
    }
  }

  private static String num(double v, int decimals) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, "%." + decimals + "f", v)
        : Double.toString(v);
  }

  private void close() {
    if (writer != null) {
      BufferedWriter w = writer;
      writer = null;
      try {
        w.close();
      } catch (IOException e) {
        throw new UncheckedIOException("cannot close the metrics log " + file, e);
      }
    }
  }
}
