package dev.lms4j.bench;

import dev.lms4j.tf.GraphDefs;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.ScratchTrace;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.run.StepLoop;
import dev.lms4j.tf.run.WorkerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * Runs {@code init} and two training steps of a graph in a worker JVM (BFC allocator on, so the
 * step statistics exist; {@link StepLoop}, which traces step 2) and writes step 2's
 * {@link ScratchTrace}. Arguments: {@code graph.pb manifest.json out.tsv}.
 */
public final class TraceWorker {
  private TraceWorker() {}

  /**
   * Traces one step of {@code graph} in a worker under {@code budgetMib} (the BFC allocator's
   * limit; large for an unbudgeted trace).
   *
   * @return the trace
   * @throws IOException when the worker fails (the message names why)
   */
  public static ScratchTrace trace(Path graph, Path manifest, long budgetMib) throws IOException {
    Path out = Files.createTempFile("lms4j-trace", ".tsv");
    try {
      String[] why = {null};
      WorkerProcess.Outcome o = WorkerProcess.run(TraceWorker.class.getName(),
          List.of(graph.toString(), manifest.toString(), out.toString()), budgetMib,
          Duration.ofMinutes(20), n -> why[0] = n.path("message").asText(null), line -> { },
          true);
      if (o.oom() || o.exitCode() != 0) {
        throw new IOException("the traced run failed: " + (why[0] != null ? why[0]
            : o.message()));
      }
      return ScratchTrace.read(out);
    } finally {
      Files.deleteIfExists(out);
    }
  }

  /** The worker's entry point (started by {@link #trace}). */
  public static void main(String[] args) throws Exception {
    int code = 0;
    try {
      var gd = GraphDefs.read(Path.of(args[0]));
      Manifest m = Manifest.read(Path.of(args[1]));
      StepLoop.run(gd, m, SessionConfigs.lms(), 2, 42, rec -> { }).stats()
          .write(Path.of(args[2]));
    } catch (Throwable e) {
      String msg = String.valueOf(e.getMessage());
      int nl = msg.indexOf('\n');
      System.out.println(WorkerProcess.PREFIX + "{\"event\":\"error\",\"message\":"
          + new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(
              e.getClass().getSimpleName() + ": " + (nl < 0 ? msg : msg.substring(0, nl))) + "}");
      code = 3;
    }
    System.out.flush();
    System.exit(code);
  }
}
