package dev.lms4j.train;

import java.io.PrintStream;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import me.tongfei.progressbar.ConsoleProgressBarConsumer;
import me.tongfei.progressbar.DelegatingProgressBarConsumer;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;
import me.tongfei.progressbar.ProgressState;

/**
 * Shows each epoch's progress: step, running loss and metrics, samples per second and the
 * estimated time left (drawn by {@code me.tongfei:progressbar}).
 *
 * <pre>{@code
 * trainer.fit(train, 5, new ProgressCallback());              // stderr, bar on a terminal
 * trainer.fit(train, 5, new ProgressCallback(System.out, false));  // plain lines
 * }</pre>
 *
 * On a terminal it draws a bar redrawn in place (metric names of more than 6 letters shortened
 * to 3, samples per second shown as {@code /s}, to leave the bar room); elsewhere (a file, a pipe, CI logs) it prints
 * plain lines instead, one every {@code interval} (default 10 s) while the epoch makes progress
 * plus a final one per epoch:
 *
 * <pre>
 * epoch 1/5 step 600/600 (100%) loss 0.5123 accuracy 0.8154 3012 samples/s elapsed 0:00:20 ETA 0:00:00
 * </pre>
 *
 * The loss and metrics shown are the means over the epoch's steps so far. The bar is redrawn by
 * the progress bar library's own daemon thread; each epoch's bar is finished in
 * {@link #onEpochEnd} (or {@link #onTrainAborted}).
 */
public final class ProgressCallback implements Callback {

  /** The default time between two plain lines. */
  public static final Duration DEFAULT_INTERVAL = Duration.ofSeconds(10);

  private static final int PLAIN_WIDTH = 200;

  private final PrintStream out;
  private final boolean terminal;
  private final Duration interval;
  private int lastEpoch;
  private int steps;
  private int batchSize;
  private ProgressBar bar;
  private long epochStart;
  private double lossSum;
  private double[] metricSums;
  private String[] metricNames;
  private String lastLine;

  /** Progress on stderr: a bar when the JVM runs on a terminal, plain lines otherwise. */
  public ProgressCallback() {
    this(System.err, System.console() != null && !"dumb".equals(System.getenv("TERM")));
  }

  /**
   * Progress on the given stream.
   *
   * @param out      where to print
   * @param terminal true to draw a bar redrawn in place (the stream is a terminal), false for
   *                 plain lines
   */
  public ProgressCallback(PrintStream out, boolean terminal) {
    this(out, terminal, DEFAULT_INTERVAL);
  }

  /**
   * Progress on the given stream, with the time between plain lines (or bar redraws).
   *
   * @param out      where to print
   * @param terminal true for a bar redrawn in place, false for plain lines
   * @param interval time between two plain lines (bars redraw every 200 ms at most)
   * @throws IllegalArgumentException when the interval is not positive
   */
  public ProgressCallback(PrintStream out, boolean terminal, Duration interval) {
    this.out = Objects.requireNonNull(out, "out");
    this.terminal = terminal;
    this.interval = Objects.requireNonNull(interval, "interval");
    if (interval.isNegative() || interval.isZero() || interval.toMillis() > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("the interval must be positive, got " + interval);
    }
  }

  /**
   * Remembers the epoch count, steps per epoch and batch size.
   *
   * @param info the fit's plan
   */
  @Override
  public void onTrainBegin(FitInfo info) {
    lastEpoch = info.lastEpoch();
    steps = info.stepsPerEpoch();
    batchSize = info.batchSize();
  }

  /**
   * Starts the epoch's bar.
   *
   * @param epoch the epoch number
   */
  @Override
  public void onEpochBegin(int epoch) {
    finish();
    lossSum = 0;
    metricSums = null;
    epochStart = System.nanoTime();
    ProgressBarBuilder b = new ProgressBarBuilder()
        .setTaskName("epoch " + epoch + "/" + lastEpoch)
        .setInitialMax(steps);
    if (terminal) {
      b.setConsumer(new ConsoleProgressBarConsumer(out))
          .setStyle(ProgressBarStyle.COLORFUL_UNICODE_BLOCK)
          .setUpdateIntervalMillis((int) Math.min(200, interval.toMillis()));
    } else {
      b.setConsumer(new DelegatingProgressBarConsumer(this::line, PLAIN_WIDTH))
          .setRenderer(ProgressCallback::plain)
          .setUpdateIntervalMillis((int) interval.toMillis());
    }
    bar = b.build();
  }

  /**
   * Advances the bar and shows the running means.
   *
   * @param batch the step within the epoch
   * @param logs  the step's logs
   */
  @Override
  public void onBatchEnd(int batch, Logs logs) {
    if (bar == null) {
      return;
    }
    if (metricSums == null) {
      metricNames = logs.metrics().keySet().toArray(new String[0]);
      metricSums = new double[metricNames.length];
    }
    lossSum += logs.loss();
    int k = 0;
    for (Map.Entry<String, Double> e : logs.metrics().entrySet()) {
      if (k < metricSums.length) {
        metricSums[k++] += e.getValue();
      }
    }
    double seconds = (System.nanoTime() - epochStart) / 1e9;
    double[] means = new double[metricSums.length];
    for (int i = 0; i < means.length; i++) {
      means[i] = metricSums[i] / batch;
    }
    String text = message(lossSum / batch, metricNames, means,
        seconds > 0 ? (double) batch * batchSize / seconds : 0);
    bar.setExtraMessage(text);
    bar.stepTo(batch);
  }

  /**
   * Finishes the epoch's bar with the epoch's means.
   *
   * @param epoch the epoch number
   * @param logs  the epoch's logs
   */
  @Override
  public void onEpochEnd(int epoch, Logs logs) {
    if (bar != null) {
      bar.setExtraMessage(message(logs.loss(), logs.metrics().keySet().toArray(new String[0]),
          logs.metrics().values().stream().mapToDouble(Double::doubleValue).toArray(),
          logs.samplesPerSecond()));
      bar.stepTo(steps);
    }
    finish();
  }

  /**
   * Finishes the current bar.
   *
   * @param cause why training stopped
   */
  @Override
  public void onTrainAborted(Throwable cause) {
    finish();
  }

  /**
   * The extra message: {@code loss 0.4321 accuracy 0.8812 2345 samples/s} in plain lines; on a
   * terminal, where the bar shares one line, {@code loss 0.4321 acc 0.8812 2345/s}.
   */
  private String message(double loss, String[] names, double[] values, double samplesPerSecond) {
    StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "loss %.4f", loss));
    for (int i = 0; i < names.length; i++) {
      String name = terminal && names[i].length() > 6 ? names[i].substring(0, 3) : names[i];
      sb.append(String.format(Locale.ROOT, " %s %.4f", name, values[i]));
    }
    sb.append(String.format(Locale.ROOT, terminal ? " %.0f/s" : " %.0f samples/s",
        samplesPerSecond));
    return sb.toString();
  }

  private void finish() {
    if (bar != null) {
      ProgressBar b = bar;
      bar = null;
      b.close();
      out.flush();
    }
  }

  private void line(String s) {
    if (s.isEmpty() || s.equals(lastLine)) {
      return; // the final refresh may repeat the last periodic one
    }
    lastLine = s;
    out.println(s);
    out.flush();
  }

  /** {@code epoch 1/5 step 300/600 (50%) loss ... elapsed 0:00:10 ETA 0:00:10}. */
  private static String plain(ProgressState p, int maxLength) {
    long current = p.getCurrent();
    long max = p.getMax();
    if (current == 0 && p.isAlive()) {
      return ""; // nothing to say yet: no line
    }
    Duration elapsed = p.getElapsedAfterStart();
    String eta = current > 0 && max > 0
        ? duration(elapsed.multipliedBy(Math.max(0, max - current)).dividedBy(current)) : "?";
    String extra = p.getExtraMessage();
    return String.format(Locale.ROOT, "%s step %d/%d (%d%%)%s elapsed %s ETA %s",
        p.getTaskName(), current, max, max > 0 ? current * 100 / max : 0,
        extra == null || extra.isEmpty() ? "" : " " + extra, duration(elapsed), eta);
  }

  private static String duration(Duration d) {
    long s = d.getSeconds();
    return String.format(Locale.ROOT, "%d:%02d:%02d", s / 3600, (s % 3600) / 60, s % 60);
  }
}
