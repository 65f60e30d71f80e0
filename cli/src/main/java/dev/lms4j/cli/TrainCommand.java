package dev.lms4j.cli;

import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.core.report.Report;
import dev.lms4j.distributed.Cluster;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.WorkerProcess;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code lms4j train}: train a zoo model under a budget. */
@Command(name = "train", mixinStandardHelpOptions = true,
    description = {"Train a model of the zoo under a memory budget, with or without LMS. Runs in "
        + "a worker JVM whose TensorFlow allocator is limited to the budget.",
        "Two ways: --steps N runs N steps on synthetic feeds and measures the peak (the LMS "
        + "check); --epochs N runs the trainer over a data set (synthetic or fashion-mnist) "
        + "with progress, optional checkpoints and a test evaluation."})
final class TrainCommand implements Callable<Integer> {
  @Mixin ModelArgs modelArgs;
  @Mixin LmsOptions lms;
  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Option(names = "--steps", description = "Training steps on synthetic feeds (default 5 "
      + "when --epochs is not given).")
  Integer steps;

  @Option(names = "--epochs", description = "Epochs of the trainer over --data.")
  Integer epochs;

  @Option(names = "--data", defaultValue = "synthetic",
      description = "synthetic (default) or fashion-mnist (with --epochs).")
  String data;

  @Option(names = "--data-dir", paramLabel = "DIR", description = "Fashion-MNIST IDX files "
      + "(default /usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist).")
  Path dataDir;

  @Option(names = "--synthetic-size", defaultValue = "2000",
      description = "Training samples of the synthetic data set (default ${DEFAULT-VALUE}).")
  int syntheticSize;

  @Option(names = "--checkpoint-dir", paramLabel = "DIR",
      description = "Save checkpoints here during training.")
  Path checkpointDir;

  @Option(names = "--checkpoint-backend", paramLabel = "NAME", defaultValue = "files",
      description = "Checkpoint backend: files (default), tf, log, or a plugin's name.")
  String checkpointBackend;

  @Option(names = "--checkpoint-every", paramLabel = "N", defaultValue = "1",
      description = "Checkpoint every N epochs (or batches with --checkpoint-unit batches).")
  int checkpointEvery;

  @Option(names = "--checkpoint-unit", defaultValue = "epochs",
      description = "epochs (default) or batches.")
  String checkpointUnit;

  @Option(names = "--resume", description = "Resume from the newest complete checkpoint in "
      + "--checkpoint-dir; --epochs counts the whole run.")
  boolean resume;

  @Option(names = "--report", paramLabel = "FILE.json", description = "Write the report here.")
  Path report;

  @Option(names = "--in-worker", hidden = true) boolean inWorker;

  @Option(names = "--no-probe", description = "Train the plan as it is: skip the probe (the "
      + "plan's first step run under the budget before training, re-planned when it runs out "
      + "of memory, the unmodified graph tried where the planner refuses).")
  boolean noProbe;

  @Option(names = "--workers", paramLabel = "N", description = "Data-parallel training with N "
      + "local worker processes on 127.0.0.1 (TensorFlow's gRPC runtime, gradients all-reduced "
      + "in the graph); --batch is per worker, the global batch is N x --batch; --budget and "
      + "--lms apply to each worker.")
  Integer workers;

  @Option(names = "--cluster", paramLabel = "H:P,H:P,...", description = "Data-parallel "
      + "training on a real cluster: every worker's host:port, the same list on every machine "
      + "(task 0, the first, is the chief and writes checkpoints); run one process per machine "
      + "with its --task.")
  String cluster;

  @Option(names = "--task", paramLabel = "I", description = "This machine's index in --cluster.")
  Integer task;

  @Option(names = "--collective-timeout", paramLabel = "SECONDS", description = "Deprecated "
      + "and ignored: a step's all-reduces are bounded by --step-timeout. (A timeout per "
      + "all-reduce made TensorFlow start a watchdog thread per call, thousands a second.)")
  Integer collectiveTimeout;

  @Option(names = "--start-timeout", paramLabel = "SECONDS", defaultValue = "300",
      description = "With --workers/--cluster: how long a worker waits at start-up for the "
          + "others to join (default ${DEFAULT-VALUE}).")
  int startTimeout;

  @Option(names = "--step-timeout", paramLabel = "SECONDS", defaultValue = "60",
      description = "With --workers/--cluster: how long one step may take (default "
          + "${DEFAULT-VALUE}), its all-reduces included: on a cluster, how long a survivor "
          + "waits for a dead or stuck peer.")
  int stepTimeout;

  @Mixin PlotOption plot;

  @Override
  public Integer call() throws Exception {
    if (modelArgs.model == null) {
      throw new IllegalArgumentException("train needs --model NAME (see 'lms4j models')");
    }
    if (!data.equals("synthetic") && !data.equals("fashion-mnist")) {
      throw new IllegalArgumentException("--data must be synthetic or fashion-mnist, not '"
          + data + "'");
    }
    plot.check();
    lms.validateOptions();
    if (workers != null || cluster != null || task != null) {
      return distributed();
    }
    boolean trainer = epochs != null || data.equals("fashion-mnist") || checkpointDir != null
        || resume;
    if (!trainer) {
      int n = steps == null ? 5 : steps;
      if (n < 1) {
        throw new IllegalArgumentException("--steps must be >= 1");
      }
      Reports.checkWritable(report);
      TrainingGraph tg = modelArgs.build();
      Pipeline.Outcome o = Pipeline.execute(modelArgs.model, tg, lms, n, !noProbe,
          new java.io.PrintStream(System.out, true));
      Reports.write(o.report(), report);
      plot.write(modelArgs.model, tg, o, lms, System.out);
      return o.exitCode();
    }
    if (steps != null) {
      throw new IllegalArgumentException("give either --steps (synthetic feeds) or --epochs "
          + "(the trainer over --data), not both");
    }
    int e = epochs == null ? 1 : epochs;
    if (e < 1) {
      throw new IllegalArgumentException("--epochs must be >= 1");
    }
    checkCheckpointOptions();
    if (syntheticSize < 1) {
      throw new IllegalArgumentException("--synthetic-size must be >= 1");
    }
    Reports.checkWritable(report);
    TrainingGraph tg = modelArgs.build();
    lms.validate((int) tg.manifest().batchSize());
    TrainerRun.Data d = TrainerRun.data(data, dataDir, tg, syntheticSize);
    if (checkpointDir != null && !inWorker) {
      try {
        dev.lms4j.checkpoint.CheckpointLock.checkFree(checkpointDir);
      } catch (IllegalStateException busy) {
        throw new IllegalArgumentException(busy.getMessage());
      }
    }
    if (!inWorker) {
      return supervise(tg);
    }
    Report r = new Report(modelArgs.model, tg.manifest().batchSize(), lms.budgetBytes(),
        lms.mode().cliName());
    dev.lms4j.tf.LmsResult[] trained = new dev.lms4j.tf.LmsResult[1];
    int code = TrainerRun.run(modelArgs.model, tg, d, lms, e, checkpointDir == null ? null
        : checkpointBackend, checkpointDir, checkpointEvery, checkpointUnit.equals("epochs"),
        resume, !noProbe, r, System.out, lr -> trained[0] = lr);
    Reports.write(r, report);
    if (plot.plot != null) {
      // the plan the trainer's callback trained (the probe's, at the ratio its attempt was
      // made at); planned here only where training did not get that far. The trainer measures
      // no peak (no traced step): the plan's prediction alone
      Plots.memory(plot.plot, modelArgs.model, tg,
          trained[0] != null ? trained[0] : Plots.plan(tg, lms), lms, r, -1);
      System.out.println("Plot: " + plot.plot);
    }
    return code;
  }

  /** The worker's last {@code lms4j: } line within its stderr tail, else the whole message. */
  static String workerMessage(String message) {
    int i = message.lastIndexOf("lms4j: ");
    if (i < 0) {
      return "the training worker stopped: " + message;
    }
    String s = message.substring(i + "lms4j: ".length());
    int end = s.indexOf(" | ");
    return end < 0 ? s : s.substring(0, end);
  }

  private void checkCheckpointOptions() {
    if (resume && checkpointDir == null) {
      throw new IllegalArgumentException("--resume needs --checkpoint-dir");
    }
    if (checkpointDir != null) {
      Paths.checkDirectory(checkpointDir, "--checkpoint-dir");
      CheckpointBackends.findOrThrow(checkpointBackend);
      if (checkpointEvery < 1) {
        throw new IllegalArgumentException("--checkpoint-every must be >= 1");
      }
      if (!checkpointUnit.equals("epochs") && !checkpointUnit.equals("batches")) {
        throw new IllegalArgumentException("--checkpoint-unit must be epochs or batches");
      }
    }
  }

  /** {@code --workers N} or {@code --cluster ... --task I}: see {@link DistributedRun}. */
  private int distributed() throws Exception {
    if (cluster != null && task == null) {
      throw new IllegalArgumentException("--cluster needs --task I (this machine's index in the "
          + "list, 0 for the first)");
    }
    if (task != null && cluster == null) {
      throw new IllegalArgumentException("--task needs --cluster H:P,H:P,...");
    }
    if (workers != null && cluster != null && !inWorker) {
      throw new IllegalArgumentException("give either --workers N (local processes) or "
          + "--cluster H:P,... --task I (one process per machine), not both");
    }
    if (workers != null && (workers < 1 || workers > 64)) {
      throw new IllegalArgumentException("--workers must be between 1 and 64, got " + workers);
    }
    if ((collectiveTimeout != null && collectiveTimeout < 1) || stepTimeout < 1
        || startTimeout < 1) {
      throw new IllegalArgumentException("--collective-timeout, --step-timeout and "
          + "--start-timeout must be >= 1 s");
    }
    if (collectiveTimeout != null && !inWorker) {
      spec.commandLine().getErr().println("lms4j: --collective-timeout is deprecated and "
          + "ignored; --step-timeout (" + stepTimeout + " s) bounds a step's all-reduces");
    }
    if (plot.plot != null) {
      throw new IllegalArgumentException("--plot is not available with --workers or --cluster "
          + "(use analyze --plot on one worker's model and batch)");
    }
    Cluster c = cluster != null ? Cluster.parse(cluster, task) : Cluster.local(workers);
    int e;
    int size = syntheticSize;
    if (steps != null) {
      if (epochs != null) {
        throw new IllegalArgumentException("give either --steps or --epochs, not both");
      }
      if (steps < 1) {
        throw new IllegalArgumentException("--steps must be >= 1");
      }
      if (!data.equals("synthetic")) {
        throw new IllegalArgumentException("--steps trains on synthetic data; use --epochs with "
            + "--data " + data);
      }
      e = 1;
    } else {
      e = epochs == null ? 1 : epochs;
      if (e < 1) {
        throw new IllegalArgumentException("--epochs must be >= 1");
      }
    }
    checkCheckpointOptions();
    if (syntheticSize < 1) {
      throw new IllegalArgumentException("--synthetic-size must be >= 1");
    }
    Reports.checkWritable(report);
    TrainingGraph tg = modelArgs.build();
    int perWorker = (int) tg.manifest().batchSize();
    lms.validate(perWorker);
    if (steps != null) {
      size = Math.multiplyExact(steps, perWorker * c.size());
    }
    TrainerRun.Data d = TrainerRun.data(data, dataDir, tg, size);
    if (d.train().size() < perWorker * c.size()) {
      throw new IllegalArgumentException("the training data has " + d.train().size()
          + " samples, fewer than one global batch of " + c.size() + " x " + perWorker);
    }
    DistributedRun.Job job = new DistributedRun.Job(modelArgs.model, tg, d, lms, e,
        checkpointDir == null ? null : checkpointBackend, checkpointDir, checkpointEvery,
        checkpointUnit.equals("epochs"), resume, Duration.ofSeconds(stepTimeout), Duration.ofSeconds(startTimeout), report);
    if (inWorker) {
      return DistributedRun.worker(job, c, System.out);
    }
    List<String> args = new ArrayList<>(spec.commandLine().getParseResult().originalArgs());
    return DistributedRun.launch(job, c, cluster == null, args, System.out,
        spec.commandLine().getErr());
  }

  /** Runs this same command in a budgeted worker JVM and relays its output. */
  private int supervise(TrainingGraph tg) throws Exception {
    List<String> args = new ArrayList<>(Arrays.asList(spec.commandLine().getParseResult()
        .originalArgs().toArray(String[]::new)));
    args.add("--in-worker");
    long budget = lms.budgetBytes();
    long mib = budget > 0 ? Math.max(1, budget >> 20) : BudgetedRunner.UNBUDGETED_MIB;
    // the worker's Trainer runs its ops one at a time (SessionConfigs.lms())
    WorkerProcess.Outcome w = WorkerProcess.run(Main.class.getName(), args, mib,
        Duration.ofHours(12), ev -> { }, System.out::println, true);
    if (w.exitCode() == 0 && w.message() == null) {
      return 0;
    }
    if (w.exitCode() == Main.BAD_INPUT || w.exitCode() == Main.FAILED) {
      // the worker's own one-line message went to its stderr: show it
      System.err.println("lms4j: " + workerMessage(w.message()));
      return w.exitCode();
    }
    String why = w.oom() ? "OOM under a budget of " + mib + " MiB: " + w.message()
        : w.message();
    System.out.println("The run failed: " + why);
    if (report != null) {
      Report r = new Report(modelArgs.model, tg.manifest().batchSize(), budget, lms.mode().cliName());
      r.error(why);
      Reports.write(r, report);
    }
    return Main.FAILED;
  }
}
