package dev.lms4j.train.examples;

import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.LmsCallback;
import dev.lms4j.train.Logs;
import dev.lms4j.train.MetricsLogCallback;
import dev.lms4j.train.ProgressCallback;
import dev.lms4j.train.Trainer;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.FashionMnist;
import dev.lms4j.train.models.ModelZoo;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Trains the zoo's {@code lenet} on Fashion-MNIST with LMS, a progress bar and a metrics log,
 * then prints the test accuracy.
 *
 * <pre>{@code
 * java ... dev.lms4j.train.examples.FashionMnistExample /usr/share/datasets/fashion-mnist 3 80MiB
 * }</pre>
 *
 * Arguments, all optional: the data directory (default {@link FashionMnist#DEFAULT_DIR}), the
 * number of epochs (3), the LMS memory budget ({@code 80MiB}; sizes as {@code 512MiB},
 * {@code 1.5GB} or bytes; {@code off} trains without LMS) and the metrics log file
 * ({@code target/fashion-mnist-metrics.csv}). Batch 100, seeded: two runs give the same
 * numbers. Exit code 0 on success, 1 when training failed, 2 for bad arguments or data.
 */
public final class FashionMnistExample {

  /** The batch size: divides both splits (60,000 and 10,000). */
  public static final int BATCH = 100;

  private static final Pattern SIZE =
      Pattern.compile("(?i)\\s*([0-9]+(?:\\.[0-9]+)?)\\s*(b|kib|mib|gib|kb|mb|gb|k|m|g)?\\s*");

  private FashionMnistExample() {}

  /**
   * Runs the example.
   *
   * @param args {@code [dataDir [epochs [budget|off [metricsFile]]]]}
   */
  public static void main(String[] args) {
    if (System.getProperty("logback.configurationFile") == null) {
      System.setProperty("logback.configurationFile",
          "dev/lms4j/train/examples/logback-example.xml");
    }
    int code;
    try {
      code = run(args);
    } catch (IllegalArgumentException e) {
      System.err.println("error: " + e.getMessage());
      System.err.println("usage: FashionMnistExample [dataDir [epochs [budget|off "
          + "[metricsFile]]]]");
      code = 2;
    } catch (IOException | RuntimeException e) {
      System.err.println("training failed: " + e);
      code = 1;
    }
    System.exit(code);
  }

  private static int run(String[] args) throws IOException {
    if (args.length > 4) {
      throw new IllegalArgumentException("at most 4 arguments, got " + args.length);
    }
    Path dir = args.length > 0 ? Path.of(args[0]) : FashionMnist.DEFAULT_DIR;
    int epochs = args.length > 1 ? epochs(args[1]) : 3;
    long budget = parseSize(args.length > 2 ? args[2] : "80MiB");
    Path metrics = Path.of(args.length > 3 ? args[3] : "target/fashion-mnist-metrics.csv");

    Dataset train = FashionMnist.train(dir);
    Dataset test = FashionMnist.test(dir);
    TrainingGraph lenet = ModelZoo.getOrThrow("lenet").build(BATCH, Map.of());
    LmsCallback lms = budget > 0 ? LmsCallback.of(budget) : null;

    long t0 = System.nanoTime();
    try (Trainer trainer = new Trainer(lenet)) {
      List<Logs> history = lms == null
          ? trainer.fit(train, epochs, new ProgressCallback(), new MetricsLogCallback(metrics))
          : trainer.fit(train, epochs, lms, new ProgressCallback(),
              new MetricsLogCallback(metrics));
      Logs result = trainer.evaluate(test);
      double seconds = (System.nanoTime() - t0) / 1e9;

      System.out.println(lms == null ? "LMS: off" : "LMS: " + describe(lms.resultOrThrow(),
          budget));
      Logs last = history.get(history.size() - 1);
      System.out.printf(Locale.ROOT, "train (epoch %d): loss %.4f, accuracy %.4f%n",
          trainer.epochsCompleted(), last.loss(), last.metric("accuracy"));
      System.out.printf(Locale.ROOT, "test: loss %.4f, accuracy %.4f (%.2f%%) on %d images%n",
          result.loss(), result.metric("accuracy"), 100 * result.metric("accuracy"),
          result.samples());
      System.out.printf(Locale.ROOT, "%d epochs in %.1f s (%.1f s per epoch); metrics in %s%n",
          epochs, seconds, seconds / epochs, metrics);
    } catch (PlanningException e) {
      System.err.println("LMS: " + e.getMessage());
      return 1;
    }
    return 0;
  }

  private static String describe(LmsResult r, long budget) {
    if (!r.rewritten()) {
      return String.format(Locale.ROOT, "budget %.1f MiB, not needed (predicted peak %.1f MiB)",
          budget / 1048576.0, r.predictedPeakBefore() / 1048576.0);
    }
    return String.format(Locale.ROOT, "budget %.1f MiB, %d swap-outs (%.1f MiB), %d swap-ins, "
        + "predicted peak %.1f MiB -> %.1f MiB; %s", budget / 1048576.0,
        r.plan().swapOuts().size(), r.plan().swapOutBytes() / 1048576.0,
        r.plan().swapInCount(), r.predictedPeakBefore() / 1048576.0,
        r.predictedPeakAfter() / 1048576.0, r.plan().params().summary());
  }

  private static int epochs(String s) {
    try {
      int n = Integer.parseInt(s.trim());
      if (n >= 1) {
        return n;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException("epochs must be an integer >= 1, got '" + s + "'");
  }

  /** {@code off} or {@code 0} is 0; otherwise a positive size like {@code 64MiB} or bytes. */
  static long parseSize(String s) {
    if (s.equalsIgnoreCase("off") || s.trim().equals("0")) {
      return 0;
    }
    Matcher m = SIZE.matcher(s);
    if (!m.matches()) {
      throw new IllegalArgumentException("budget must be a size such as 64MiB, 1.5GB or bytes, "
          + "or 'off', got '" + s + "'");
    }
    double v = Double.parseDouble(m.group(1));
    String unit = m.group(2) == null ? "b" : m.group(2).toLowerCase(Locale.ROOT);
    double factor = switch (unit) {
      case "kib", "k" -> 1L << 10;
      case "mib", "m" -> 1L << 20;
      case "gib", "g" -> 1L << 30;
      case "kb" -> 1e3;
      case "mb" -> 1e6;
      case "gb" -> 1e9;
      default -> 1;
    };
    long bytes = (long) (v * factor);
    if (bytes <= 0) {
      throw new IllegalArgumentException("budget must be positive, got '" + s + "'");
    }
    return bytes;
  }
}
