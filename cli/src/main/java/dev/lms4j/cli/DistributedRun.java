package dev.lms4j.cli;

import dev.lms4j.core.plan.LmsMode;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointBackends;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.core.report.Report;
import dev.lms4j.core.report.Sizes;
import dev.lms4j.distributed.Cluster;
import dev.lms4j.distributed.DataParallelTrainer;
import dev.lms4j.distributed.WorkerGroup;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.WorkerProcess;
import dev.lms4j.train.Callback;
import dev.lms4j.train.CheckpointCallback;
import dev.lms4j.train.LmsCallback;
import dev.lms4j.train.Logs;
import dev.lms4j.train.ProgressCallback;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.tensorflow.exceptions.TensorFlowException;

/**
 * {@code lms4j train --workers N} and {@code --cluster ... --task I}: data-parallel training on
 * TensorFlow's distributed runtime. The parent ({@link #launch}) starts one budgeted worker JVM
 * per local task (this command again, with {@code --cluster --task --in-worker}), shows their
 * output prefixed per worker, stops all of them when one fails, and writes the job's report;
 * each worker ({@link #worker}) trains with a {@link DataParallelTrainer}.
 */
final class DistributedRun {
  private static final ObjectMapper JSON = new ObjectMapper();

  private DistributedRun() {}

  /** What the job trains on and how: the options shared by parent and workers. */
  record Job(String model, TrainingGraph perWorker, TrainerRun.Data data, LmsOptions lms,
      int epochs, String ckptBackend, Path ckptDir, int ckptEvery, boolean perEpoch,
      boolean resume, Duration stepTimeout, Duration startTimeout,
      Path report) {}

  /**
   * Runs the worker processes of the local tasks and waits for them.
   *
   * @param cluster  the cluster; with {@code localTasks} all tasks, else only {@code cluster.task()}
   * @param allTasks whether this process starts every task (--workers) or only its own (--cluster)
   * @param args     this command's original arguments
   * @param out      where the job's and the workers' output goes
   * @param err      where the failure message goes
   */
  static int launch(Job job, Cluster cluster, boolean allTasks, List<String> args,
      PrintStream out, java.io.PrintWriter err) throws Exception {
    List<Integer> tasks = new ArrayList<>();
    if (allTasks) {
      for (int t = 0; t < cluster.size(); t++) {
        tasks.add(t);
      }
    } else {
      tasks.add(cluster.task());
    }
    List<List<String>> argv = new ArrayList<>();
    for (int t : tasks) {
      List<String> a = new ArrayList<>(args);
      if (allTasks) {
        a.addAll(List.of("--cluster", cluster.spec(), "--task", Integer.toString(t)));
      }
      a.add("--in-worker");
      argv.add(a);
    }
    long budget = job.lms().budgetBytes();
    long mib = budget > 0 ? Math.max(1, budget >> 20) : dev.lms4j.tf.run.BudgetedRunner
        .UNBUDGETED_MIB;
    int perWorker = (int) job.perWorker().manifest().batchSize();
    out.printf(Locale.ROOT, "Data-parallel job: %d worker%s (%s), batch %d per worker, global "
            + "batch %d, %s per worker%n", cluster.size(), cluster.size() > 1 ? "s" : "",
        allTasks ? "local processes on " + cluster.spec() : "this machine is task "
            + cluster.task() + " of " + cluster.spec(),
        perWorker, perWorker * cluster.size(),
        budget > 0 ? "budget " + Sizes.mib(budget) + ", LMS " + job.lms().mode().cliName()
            : "no budget");
    Map<Integer, JsonNode> reports = new ConcurrentHashMap<>();
    Map<Integer, List<JsonNode>> epochs = new ConcurrentHashMap<>();
    List<JsonNode> chiefSteps = java.util.Collections.synchronizedList(new ArrayList<>());
    WorkerGroup.Outcome o = WorkerGroup.run(Main.class.getName(), argv, tasks, mib,
        Duration.ofHours(12), out::println, (task, ev) -> {
          switch (ev.path("event").asText()) {
            case "report" -> reports.put(task, ev.get("report"));
            case "epoch" -> epochs.computeIfAbsent(task, k -> java.util.Collections
                .synchronizedList(new ArrayList<>())).add(ev);
            case "step" -> {
              if (task == 0) {
                chiefSteps.add(ev);
              }
            }
            default -> { }
          }
        });
    Report r = new Report(job.model(), (long) perWorker * cluster.size(), budget,
        job.lms().mode().cliName());
    ObjectNode d = r.extra("distributed");
    d.put("workers", cluster.size()).put("per_worker_batch", perWorker)
        .put("global_batch", perWorker * cluster.size()).put("cluster", cluster.spec());
    if (!allTasks) {
      d.put("task", cluster.task());
    }
    double jobSamplesPerSecond = jobThroughput(epochs, cluster.size());
    if (!Double.isNaN(jobSamplesPerSecond)) {
      d.put("samples_per_second", jobSamplesPerSecond);
    }
    ArrayNode ws = d.putArray("per_worker");
    for (Map.Entry<Integer, JsonNode> e : new TreeMap<>(reports).entrySet()) {
      ObjectNode w = ws.addObject();
      w.put("task", e.getKey()).put("address", cluster.workers().get(e.getKey()));
      w.set("report", e.getValue());
    }
    int[] no = new int[chiefSteps.size()];
    double[] loss = new double[no.length];
    double[] ms = new double[no.length];
    for (int i = 0; i < no.length; i++) {
      no[i] = chiefSteps.get(i).get("step").asInt();
      loss[i] = chiefSteps.get(i).get("loss").asDouble();
      ms[i] = chiefSteps.get(i).get("ms").asDouble();
    }
    if (!o.ok()) {
      String why = o.message() + (job.ckptDir() != null ? "; resume from the last checkpoint "
          + "in " + job.ckptDir() + " with --resume" : "");
      r.error(why);
      if (no.length > 0) {
        r.measured(false, -1, "not measured in trainer mode (no traced step)", Double.NaN, no,
            loss, ms);
      }
      Reports.write(r, job.report());
      err.println("lms4j: the data-parallel job failed: " + why);
      err.flush();
      return o.exitCode() == Main.BAD_INPUT ? Main.BAD_INPUT : Main.FAILED;
    }
    r.measured(true, -1, "not measured in trainer mode (no traced step)", Double.NaN, no, loss,
        ms);
    JsonNode chief = reports.get(0);
    if (chief != null && chief.has("measured")) {
      ObjectNode m = r.json().with("measured");
      for (String k : List.of("test_accuracy", "test_loss", "epochs", "data")) {
        if (chief.get("measured").has(k)) {
          m.set(k, chief.get("measured").get(k));
        }
      }
    }
    if (!Double.isNaN(jobSamplesPerSecond)) {
      out.printf(Locale.ROOT, "Job: %d workers, %.0f samples/s in all (global batch %d)%n",
          cluster.size(), jobSamplesPerSecond, perWorker * cluster.size());
    }
    Reports.write(r, job.report());
    return 0;
  }

  /**
   * The job's samples per second: the per-worker samples times the workers over the slowest
   * reporting worker's training time (the workers step together: every step waits for the
   * all-reduce).
   */
  private static double jobThroughput(Map<Integer, List<JsonNode>> epochs, int workers) {
    if (epochs.isEmpty()) {
      return Double.NaN;
    }
    double slowest = 0;
    long samples = -1;
    for (List<JsonNode> es : epochs.values()) {
      double s = 0;
      long n = 0;
      synchronized (es) {
        for (JsonNode e : es) {
          s += e.get("seconds").asDouble();
          n += e.get("samples").asLong();
        }
      }
      slowest = Math.max(slowest, s);
      samples = samples < 0 ? n : Math.min(samples, n);
    }
    return slowest > 0 ? samples * (double) workers / slowest : Double.NaN;
  }

  /** One worker: trains its share with the job's callbacks; runs inside the budgeted JVM. */
  static int worker(Job job, Cluster cluster, PrintStream out) throws Exception {
    TrainingGraph tg = job.perWorker();
    List<Callback> callbacks = new ArrayList<>();
    LmsCallback lmsCallback = null;
    if (job.lms().mode() != LmsMode.OFF) {
      lmsCallback = new LmsCallback(job.lms().lms((int) tg.manifest().batchSize()));
      callbacks.add(lmsCallback);
    }
    callbacks.add(new ProgressCallback(out, false));
    callbacks.add(new Events(cluster.task()));
    CheckpointBackend backend = null;
    CheckpointCallback ckpt = null;
    if (job.ckptBackend() != null) {
      backend = CheckpointBackends.open(job.ckptBackend(), "dir=" + job.ckptDir()
          .toAbsolutePath());
      CheckpointCallback.Builder cb = CheckpointCallback.builder(backend).resume(job.resume());
      ckpt = (job.perEpoch() ? cb.everyEpochs(job.ckptEvery()) : cb.everyBatches(job.ckptEvery()))
          .build();
      callbacks.add(ckpt);
    }
    Report report = new Report(job.model(), tg.manifest().batchSize(), job.lms().budgetBytes(),
        job.lms().mode().cliName());
    report.extra("worker").put("task", cluster.task()).put("workers", cluster.size())
        .put("address", cluster.workers().get(cluster.task()));
    DataParallelTrainer.Options opts = DataParallelTrainer.Options.defaults()
        .withStepTimeout(job.stepTimeout())
        .withStartTimeout(job.startTimeout());
    try (DataParallelTrainer t = new DataParallelTrainer(tg, cluster, opts)) {
      int todo = job.epochs();
      if (ckpt != null && job.resume()) {
        todo = job.epochs() - ckpt.latestEpoch();
        if (todo <= 0) {
          out.printf("Already trained %d epochs (checkpoint in %s); nothing to do.%n",
              ckpt.latestEpoch(), job.ckptDir());
          return 0;
        }
      }
      List<Logs> history;
      try {
        history = t.fit(job.data().train(), todo, callbacks.toArray(Callback[]::new));
      } catch (PlanningException e) {
        report.error(e.getMessage());
        event(Map.of("event", "report", "report", report.json()));
        System.err.println("lms4j: task " + cluster.task() + " does not fit: " + e.getMessage());
        return Main.FAILED;
      } catch (TensorFlowException e) {
        System.err.println("lms4j: task " + cluster.task() + ": training stopped: "
            + firstLine(e.getMessage()) + " (a peer worker died, stopped answering, or timed "
            + "out; step timeout " + job.stepTimeout().toSeconds() + " s)");
        return Main.FAILED;
      }
      Logs test = t.evaluate(job.data().test());
      if (lmsCallback != null) {
        Reports.lms(report, lmsCallback.resultOrThrow(), null);
      }
      int first = t.trainer().epochsCompleted() - history.size() + 1;
      int[] no = new int[history.size()];
      double[] loss = new double[history.size()];
      double[] ms = new double[history.size()];
      double samples = 0;
      double seconds = 0;
      for (int i = 0; i < history.size(); i++) {
        no[i] = first + i;
        loss[i] = history.get(i).loss();
        double s = history.get(i).samples() / history.get(i).samplesPerSecond();
        ms[i] = s * 1000;
        samples += history.get(i).samples();
        seconds += s;
      }
      report.measured(true, -1, "not measured in trainer mode (no traced step)", Double.NaN, no,
          loss, ms);
      report.json().with("measured").put("test_accuracy", test.metric("accuracy"))
          .put("test_loss", test.loss()).put("epochs", t.trainer().epochsCompleted())
          .put("data", job.data().name())
          .put("samples_per_second", seconds > 0 ? samples / seconds : 0);
      event(Map.of("event", "report", "report", report.json()));
      out.printf(Locale.ROOT, "Task %d: %.0f samples/s on its share; test (%s, %d samples): "
              + "loss %.4f, accuracy %.2f%%%n", cluster.task(), seconds > 0 ? samples / seconds
              : 0, job.data().name(), job.data().test().size(), test.loss(),
          100 * test.metric("accuracy"));
      return 0;
    } finally {
      if (ckpt != null) {
        ckpt.close();
      }
      if (backend != null) {
        backend.close();
      }
    }
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "(no message)";
    }
    String line = s.strip().lines().findFirst().orElse("");
    return line.length() > 400 ? line.substring(0, 400) + "..." : line;
  }

  private static void event(Map<String, Object> ev) {
    try {
      System.out.println(WorkerProcess.PREFIX + JSON.writeValueAsString(ev));
      System.out.flush();
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Sends each step's and epoch's figures to the parent. */
  private static final class Events implements Callback {
    private final int task;
    private int step;
    private int epoch;

    Events(int task) {
      this.task = task;
    }

    @Override
    public void onEpochBegin(int e) {
      epoch = e;
    }

    @Override
    public void onBatchEnd(int batch, Logs logs) {
      step++;
      event(Map.of("event", "step", "task", task, "epoch", epoch, "step", step, "loss",
          logs.loss(), "ms", logs.samples() / Math.max(1e-9, logs.samplesPerSecond()) * 1000));
    }

    @Override
    public void onEpochEnd(int e, Logs logs) {
      event(Map.of("event", "epoch", "task", task, "epoch", e, "loss", logs.loss(), "samples",
          logs.samples(), "seconds", logs.samples() / Math.max(1e-9, logs.samplesPerSecond())));
    }
  }
}
