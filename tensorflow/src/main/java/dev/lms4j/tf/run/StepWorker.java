package dev.lms4j.tf.run;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.tf.GraphDefs;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.SessionConfigs;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.tensorflow.exceptions.TFResourceExhaustedException;
import org.tensorflow.proto.RewriterConfig;

/**
 * Entry point of the worker JVM that {@link BudgetedRunner} starts with the BFC budget in its
 * environment. Arguments: {@code graph.pb manifest.json steps seed deterministic memopt}.
 * Writes one line per event to stdout, each {@code LMS4J <json>}.
 */
public final class StepWorker {
  /** Prefix of result lines on stdout. */
  public static final String PREFIX = WorkerProcess.PREFIX;

  private StepWorker() {}

  /** Runs the job and exits 0 (also on OOM, which is a result) or 3 on other errors. */
  public static void main(String[] args) throws Exception {
    PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out),
        true, StandardCharsets.UTF_8);
    ObjectMapper json = new ObjectMapper();
    int code = 0;
    try {
      var gd = GraphDefs.read(Path.of(args[0]));
      Manifest m = Manifest.read(Path.of(args[1]));
      int steps = Integer.parseInt(args[2]);
      long seed = Long.parseLong(args[3]);
      boolean deterministic = Boolean.parseBoolean(args[4]);
      var memOpt = RewriterConfig.MemOptType.valueOf(args[5]);
      var cfg = SessionConfigs.build(deterministic, true, memOpt);
      StepLoop.Trace t = StepLoop.run(gd, m, cfg, steps, seed, rec -> {
        ObjectNode n = json.createObjectNode().put("event", "step").put("step", rec.step())
            .put("loss", rec.loss()).put("ms", rec.ms()).put("traced", rec.traced());
        out.println(PREFIX + n);
      });
      ObjectNode done = json.createObjectNode().put("event", "done")
          .put("peak_bytes", t.peakBytes()).put("allocator", t.allocator())
          .put("peak_with_scratch_bytes", t.peakWithScratchBytes());
      ObjectNode scratch = done.putObject("scratch");
      t.scratch().forEach(scratch::put);
      out.println(PREFIX + done);
    } catch (TFResourceExhaustedException e) {
      out.println(PREFIX + json.createObjectNode().put("event", "oom")
          .put("message", firstLine(e.getMessage())));
    } catch (Throwable e) {
      out.println(PREFIX + json.createObjectNode().put("event", "error")
          .put("message", e.getClass().getSimpleName() + ": " + firstLine(e.getMessage())));
      code = 3;
    }
    out.flush();
    System.exit(code);
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "";
    }
    int nl = s.indexOf('\n');
    return nl < 0 ? s : s.substring(0, nl);
  }
}
