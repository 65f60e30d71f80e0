package dev.lms4j.cli;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.checkpoint.CheckpointLock;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.report.Report;
import dev.lms4j.core.report.Sizes;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.Callback;
import dev.lms4j.train.CheckpointCallback;
import dev.lms4j.train.LmsCallback;
import dev.lms4j.train.Logs;
import dev.lms4j.train.ProgressCallback;
import dev.lms4j.train.Trainer;
import dev.lms4j.train.data.Dataset;
import dev.lms4j.train.data.FashionMnist;
import dev.lms4j.train.data.SyntheticDataset;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * {@code lms4j train} with epochs over a data set: the trainer with its callbacks (LMS,
 * progress, checkpoints), then evaluation on the test split. Runs inside the budgeted worker.
 */
final class TrainerRun {
  private TrainerRun() {}

  /** Where the data comes from. */
  record Data(Dataset train, Dataset test, String name) {}

  /** Loads the data; bad input throws IllegalArgumentException. */
  static Data data(String data, Path dataDir, TrainingGraph tg, int syntheticSize)
      throws java.io.IOException {
    if (data.equals("fashion-mnist")) {
      Path dir = dataDir != null ? dataDir : FashionMnist.DEFAULT_DIR;
      if (!FashionMnist.available(dir)) {
        throw new IllegalArgumentException("Fashion-MNIST is not in " + dir + " (apt-get install "
            + "dataset-fashion-mnist, or give --data-dir)");
      }
      return new Data(FashionMnist.train(dir), FashionMnist.test(dir), "fashion-mnist");
    }
    Dataset all = SyntheticDataset.forManifest(tg.manifest(), syntheticSize + syntheticSize / 5,
        42);
    return new Data(all.slice(0, syntheticSize), all.slice(syntheticSize, all.size()),
        "synthetic");
  }

  /**
   * Trains and evaluates, filling the report; returns the exit code.
   *
   * @param ckptBackend checkpoint backend name, or null for none
   * @param planned     given the plan the LMS callback trained (the probe's, where it ran)
   */
  static int run(String name, TrainingGraph tg, Data data, LmsOptions o, int epochs,
      String ckptBackend, Path ckptDir, int ckptEvery, boolean perEpoch, boolean resume,
      boolean probe, Report report, PrintStream out,
      java.util.function.Consumer<dev.lms4j.tf.LmsResult> planned) throws Exception {
    LmsMode mode = o.mode();
    long budget = o.budgetBytes();
    List<Callback> callbacks = new ArrayList<>();
    LmsCallback lmsCallback = null;
    if (mode != LmsMode.OFF) {
      lmsCallback = new LmsCallback(o.lms((int) tg.manifest().batchSize())).withProbe(probe);
      callbacks.add(lmsCallback);
    }
    callbacks.add(new ProgressCallback(out, false));
    CheckpointBackend backend = null;
    CheckpointCallback ckpt = null;
    CheckpointLock lock = null;
    if (ckptBackend != null) {
      lock = lock(ckptDir);
      backend = CheckpointBackends.open(ckptBackend, "dir=" + ckptDir.toAbsolutePath());
      CheckpointCallback.Builder cb = CheckpointCallback.builder(backend).resume(resume);
      ckpt = (perEpoch ? cb.everyEpochs(ckptEvery) : cb.everyBatches(ckptEvery)).build();
      callbacks.add(ckpt);
    }
    try (Trainer t = new Trainer(tg)) {
      List<Logs> history;
      try {
        // the resume (in the session's start) says how many epochs are done: the newest
        // checkpoint that loads, which need not be the newest one listed
        history = t.fitUntil(data.train(), epochs, callbacks.toArray(Callback[]::new));
        if (history.isEmpty()) {
          out.printf("Already trained %d epochs (checkpoint in %s); nothing to do.%n",
              t.epochsCompleted(), ckptDir);
          return 0;
        }
      } catch (PlanningException e) {
        if (lmsCallback != null) {
          lmsCallback.probe().ifPresent(po -> Reports.probe(report, po));
        }
        report.error(e.getMessage());
        System.err.println("lms4j: does not fit: " + e.getMessage());
        return Main.FAILED;
      } catch (java.io.UncheckedIOException e) {
        // a checkpoint that could not be written (disk full, ...): the earlier ones are intact
        Throwable root = e;
        while (root.getCause() != null) {
          root = root.getCause();
        }
        String why = e.getMessage() + ": " + root.getMessage();
        report.error(why);
        System.err.println("lms4j: " + why);
        return Main.FAILED;
      }
      Logs test = t.evaluate(data.test());
      if (lmsCallback != null) {
        Reports.lms(report, lmsCallback.resultOrThrow(), null);
        planned.accept(lmsCallback.resultOrThrow());
        lmsCallback.probe().ifPresent(po -> Reports.probe(report, po));
      }
      int first = t.epochsCompleted() - history.size() + 1;
      int[] no = new int[history.size()];
      double[] loss = new double[history.size()];
      double[] ms = new double[history.size()];
      for (int i = 0; i < history.size(); i++) {
        no[i] = first + i;
        loss[i] = history.get(i).loss();
        ms[i] = history.get(i).samples() / history.get(i).samplesPerSecond() * 1000;
      }
      report.measured(true, -1, "not measured in trainer mode (no traced step)", Double.NaN, no,
          loss, ms);
      report.json().with("measured").put("test_accuracy", test.metric("accuracy"))
          .put("test_loss", test.loss()).put("epochs", t.epochsCompleted())
          .put("data", data.name());
      out.printf(Locale.ROOT, "Test (%s, %d samples): loss %.4f, accuracy %.2f%%%s%n",
          data.name(), data.test().size(), test.loss(), 100 * test.metric("accuracy"),
          budget > 0 ? " (budget " + Sizes.mib(budget) + ")" : "");
      return 0;
    } finally {
      if (ckpt != null) {
        ckpt.close();
      }
      if (backend != null) {
        backend.close();
      }
      if (lock != null) {
        lock.close();
      }
    }
  }

  /** The writer's lock of the checkpoint directory; another writer is bad input. */
  static CheckpointLock lock(Path dir) throws java.io.IOException {
    try {
      return CheckpointLock.acquire(dir);
    } catch (IllegalStateException e) {
      throw new IllegalArgumentException(e.getMessage());
    }
  }
}
