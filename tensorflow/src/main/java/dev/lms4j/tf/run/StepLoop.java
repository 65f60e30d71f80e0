package dev.lms4j.tf.run;

import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.ScratchTrace;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.RunMetadata;
import org.tensorflow.proto.RunOptions;
import org.tensorflow.proto.StepStats;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TFloat64;

/**
 * Runs training steps of a GraphDef in this process: init op, then {@code steps} steps that feed
 * synthetic data, fetch the loss and the metrics and run the train op. Step 2 (step 1 when there
 * is only one) is traced ({@code FULL_TRACE}) to read the allocator's bytes in use after each
 * op: the first step also pays one-time costs (kernel and primitive creation) that would distort
 * op times.
 */
public final class StepLoop {
  private StepLoop() {}

  /**
   * Allocator statistics of a traced step.
   *
   * @param peakBytes the highest {@code allocator_bytes_in_use} (-1 when none was reported)
   * @param allocator the allocator that reported it
   * @param stats     the traced step's kernels, in the order they started (null when the step
   *                  was not traced)
   */
  public record Trace(long peakBytes, String allocator, ScratchTrace stats) {
    /** A trace without step statistics. */
    public Trace(long peakBytes, String allocator) {
      this(peakBytes, allocator, null);
    }

    /**
     * Each op's kernel scratch ({@link ScratchTrace#scratchByOp()}), bytes by op name; empty
     * when the step was not traced.
     */
    public Map<String, Long> scratch() {
      return stats == null ? Map.of() : stats.scratchByOp();
    }

    /**
     * The traced peak counting what each kernel held while it ran beyond its outputs
     * ({@link ScratchTrace#peakBytesWithScratch()}): TensorFlow's own convolution kernels take
     * col buffers that are freed before the step statistics read the bytes in use, so
     * {@link #peakBytes()} misses them; -1 when the step was not traced.
     */
    public long peakWithScratchBytes() {
      return stats == null || peakBytes < 0 ? -1 : Math.max(peakBytes,
          stats.peakBytesWithScratch());
    }
  }

  /**
   * Runs the steps; each finished step is passed to {@code onStep} at once (so a supervisor
   * sees progress before a later step fails).
   *
   * @return the trace of the traced step (peak -1 when the allocator reported nothing)
   */
  public static Trace run(GraphDef gd, Manifest m, ConfigProto config, int steps, long seed,
      Consumer<StepRecord> onStep) {
    Trace trace = new Trace(-1, "none");
    dev.lms4j.tf.NativeSwap.ensureLoadedFor(gd);
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      try (Session s = new Session(g, config)) {
        if (m.init() != null) {
          s.runner().addTarget(m.init()).run();
        }
        for (int step = 1; step <= steps; step++) {
          Session.Runner r = s.runner();
          List<Tensor> feeds = SyntheticFeeds.feed(r, m, seed, step);
          try {
            // the metrics too, as the Trainer fetches them: a probe measures the step training
            // runs, and the memory model holds every tensor the manifest's run ops fetch
            r.fetch(m.loss());
            m.metrics().values().forEach(r::fetch);
            r.addTarget(m.trainOp());
            boolean traced = step == Math.min(2, steps);
            if (traced) {
              r.setOptions(RunOptions.newBuilder()
                  .setTraceLevel(RunOptions.TraceLevel.FULL_TRACE).build());
            }
            long t0 = System.nanoTime();
            try (Result res = traced ? r.runAndFetchMetadata() : r.run()) {
              double ms = (System.nanoTime() - t0) / 1e6;
              double loss = scalar(res.get(0));
              if (traced && res.getMetadata().isPresent()) {
                trace = peak(res.getMetadata().get());
                dumpIfAsked(res.getMetadata().get());
              }
              onStep.accept(new StepRecord(step, loss, ms, traced));
            }
          } finally {
            for (Tensor t : feeds) {
              t.close();
            }
          }
        }
      }
    }
    return trace;
  }

  /** The highest allocator_bytes_in_use over all node stats of a traced step. */
  public static Trace peak(RunMetadata md) {
    long peak = -1;
    String alloc = "none";
    StepStats ss = md.getStepStats();
    for (var dev : ss.getDevStatsList()) {
      for (var node : dev.getNodeStatsList()) {
        for (var mem : node.getMemoryList()) {
          if (mem.getAllocatorBytesInUse() > peak) {
            peak = mem.getAllocatorBytesInUse();
            alloc = mem.getAllocatorName();
          }
        }
      }
    }
    return new Trace(peak, alloc, ScratchTrace.of(ss));
  }

  /**
   * When {@code LMS4J_DUMP_TRACE} names a file, writes the traced step's ops in execution order
   * with the allocator's bytes in use after each, the op's own peak and its output bytes
   * (tab-separated: start micros, op, bytes in use, op peak, output bytes, duration micros, op
   * type, and each output as {@code slot:address:bytes}, comma-separated: an output at an
   * input's address took that buffer over in place).
   */
  private static void dumpIfAsked(RunMetadata md) {
    String file = System.getenv("LMS4J_DUMP_TRACE");
    if (file == null || file.isEmpty()) {
      return;
    }
    List<String> rows = new ArrayList<>();
    for (var dev : md.getStepStats().getDevStatsList()) {
      for (var node : dev.getNodeStatsList()) {
        long bytes = -1;
        long opPeak = 0;
        for (var mem : node.getMemoryList()) {
          bytes = Math.max(bytes, mem.getAllocatorBytesInUse());
          opPeak = Math.max(opPeak, mem.getPeakBytes());
        }
        long outBytes = 0;
        StringBuilder outs = new StringBuilder();
        for (var o : node.getOutputList()) {
          var a = o.getTensorDescription().getAllocationDescription();
          outBytes += a.getAllocatedBytes();
          outs.append(outs.length() == 0 ? "" : ",").append(o.getSlot()).append(':')
              .append(Long.toUnsignedString(a.getPtr())).append(':').append(a.getRequestedBytes());
        }
        rows.add(node.getAllStartMicros() + "\t" + node.getNodeName() + "\t" + bytes + "\t"
            + opPeak + "\t" + outBytes + "\t" + node.getAllEndRelMicros() + "\t"
            + opType(node.getTimelineLabel()) + "\t" + outs);
      }
    }
    rows.sort(java.util.Comparator.comparingLong(r -> Long.parseLong(r.substring(0,
        r.indexOf('\t')))));
    try {
      java.nio.file.Files.write(java.nio.file.Path.of(file), rows);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** The op type in a step-stats timeline label ({@code "name = Type(inputs)"}), or "". */
  static String opType(String label) {
    int eq = label.indexOf(" = ");
    int paren = label.indexOf('(', eq + 3);
    return eq < 0 || paren < 0 ? "" : label.substring(eq + 3, paren).trim();
  }

  private static double scalar(Tensor t) {
    if (t instanceof TFloat32 f) {
      return f.getFloat();
    }
    if (t instanceof TFloat64 d) {
      return d.getDouble();
    }
    throw new IllegalArgumentException("loss must be a float32 or float64 scalar, got "
        + t.dataType());
  }
}
