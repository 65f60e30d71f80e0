package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.tensorflow.proto.StepStats;

/**
 * What each op of a traced step allocated, read from TensorFlow's step statistics
 * ({@code RunOptions.trace_level = FULL_TRACE}, {@code RunMetadata.step_stats}), and the kernel
 * scratch it implies, as the map {@link dev.lms4j.core.graph.DataflowGraph#withScratch} takes.
 *
 * <p>For every executed node the allocator reports (per {@code AllocatorMemoryUsed}) the bytes
 * in use after the node ({@code allocator_bytes_in_use}), the high-water mark of the node's own
 * allocations while it ran ({@code peak_bytes}) and what it still held when it ended
 * ({@code live_bytes}: its outputs). A kernel's <b>scratch</b> (oneDNN's workspace, im2col
 * buffers, temporaries) is what it held at its peak beyond what it kept:
 * {@code peak_bytes - live_bytes}. An output forwarded in place from an input is allocated by
 * nobody and counts neither way.
 *
 * <pre>{@code
 * RunMetadata md = result.getMetadata().orElseThrow();     // a FULL_TRACE step
 * ScratchTrace trace = ScratchTrace.of(md.getStepStats());
 * DataflowGraph measured = graph.withScratch(trace.scratchByOp());
 * }</pre>
 *
 * <p>The statistics exist only with a tracking allocator: run the step with
 * {@code TF_CPU_ALLOCATOR_USE_BFC=true} (the budgeted worker sets it); without it every figure
 * reads 0. {@link #write} and {@link #read} keep a trace as a tab-separated file, so a worker
 * process can hand it to its parent.
 */
public final class ScratchTrace {
  private static final String HEADER = "#start_us\top\ttype\tbytes_in_use\top_peak\top_live"
      + "\tduration_us";
  private final List<Node> nodes;

  /**
   * One executed node.
   *
   * @param name        the node's name
   * @param type        its op type ("" when the timeline label does not give it)
   * @param startMicros when it started (execution order)
   * @param bytesInUse  the allocator's bytes in use after it ran
   * @param peakBytes   the high-water mark of its own allocations while it ran
   * @param liveBytes   what it still held when it ended (its allocated outputs)
   * @param micros      how long it ran
   */
  public record Node(String name, String type, long startMicros, long bytesInUse, long peakBytes,
      long liveBytes, long micros) {
    /** Bytes the kernel held at its peak beyond its outputs: {@code peak - live}, at least 0. */
    public long scratchBytes() {
      return Math.max(0, peakBytes - liveBytes);
    }
  }

  private ScratchTrace(List<Node> nodes) {
    List<Node> sorted = new ArrayList<>(nodes);
    sorted.sort(Comparator.comparingLong(Node::startMicros));
    // a node that allocated nothing has no memory statistics: the bytes in use stay as they were
    long inUse = 0;
    for (int i = 0; i < sorted.size(); i++) {
      Node n = sorted.get(i);
      if (n.bytesInUse() < 0) {
        sorted.set(i, new Node(n.name(), n.type(), n.startMicros(), inUse, n.peakBytes(),
            n.liveBytes(), n.micros()));
      } else {
        inUse = n.bytesInUse();
      }
    }
    this.nodes = Collections.unmodifiableList(sorted);
  }

  /** The nodes of a traced step's statistics, in execution order. */
  public static ScratchTrace of(StepStats stats) {
    List<Node> out = new ArrayList<>();
    for (var dev : stats.getDevStatsList()) {
      for (var node : dev.getNodeStatsList()) {
        long inUse = node.getMemoryCount() == 0 ? -1 : 0;
        long peak = 0;
        long live = 0;
        for (var mem : node.getMemoryList()) {
          inUse = Math.max(inUse, mem.getAllocatorBytesInUse());
          peak += mem.getPeakBytes();
          live += mem.getLiveBytes();
        }
        out.add(new Node(node.getNodeName(), opType(node.getTimelineLabel()),
            node.getAllStartMicros(), inUse, peak, live, node.getAllEndRelMicros()));
      }
    }
    return new ScratchTrace(out);
  }

  /** The nodes in execution order. */
  public List<Node> nodes() {
    return nodes;
  }

  /**
   * A topological order of {@code g} that follows this trace: ready ops run in the order
   * TensorFlow ran them; ops it did not run (folded by grappler) as soon as they are ready.
   */
  public int[] orderOf(DataflowGraph g) {
    Map<String, Integer> pos = new HashMap<>();
    for (int i = 0; i < nodes.size(); i++) {
      pos.putIfAbsent(nodes.get(i).name(), i);
    }
    int[] prio = new int[g.size()];
    for (int v = 0; v < g.size(); v++) {
      prio[v] = pos.getOrDefault(g.op(v).name(), -1);
    }
    return g.topologicalOrder(Comparator.comparingInt((Integer v) -> prio[v])
        .thenComparingInt(v -> v));
  }

  /**
   * Scratch bytes per traced op name (an op run more than once keeps its largest), including
   * the ops that used none: a measured 0 replaces the model's estimate too.
   */
  public Map<String, Long> scratchByOp() {
    Map<String, Long> m = new TreeMap<>();
    for (Node n : nodes) {
      m.merge(n.name(), n.scratchBytes(), Math::max);
    }
    return m;
  }

  /** The highest {@code allocator_bytes_in_use} after any node (what lms4j calls the traced peak). */
  public long peakBytesInUse() {
    long p = 0;
    for (Node n : nodes) {
      p = Math.max(p, n.bytesInUse());
    }
    return p;
  }

  /**
   * The highest bytes in use <em>while</em> a node ran: the bytes in use after the node before
   * it plus the node's own high-water mark. Unlike {@link #peakBytesInUse()} it counts kernel
   * scratch; frees during a node (of its inputs) are not seen, so it can be a little high.
   */
  public long peakBytesWithScratch() {
    long p = 0;
    long before = 0;
    for (Node n : nodes) {
      p = Math.max(p, Math.max(n.bytesInUse(), before + n.peakBytes()));
      before = n.bytesInUse();
    }
    return p;
  }

  /** Writes the trace as a tab-separated file (one node a line, after a header line). */
  public void write(Path file) throws IOException {
    List<String> rows = new ArrayList<>(nodes.size() + 1);
    rows.add(HEADER);
    for (Node n : nodes) {
      rows.add(n.startMicros() + "\t" + n.name() + "\t" + n.type() + "\t" + n.bytesInUse() + "\t"
          + n.peakBytes() + "\t" + n.liveBytes() + "\t" + n.micros());
    }
    Files.write(file, rows, StandardCharsets.UTF_8);
  }

  /**
   * Reads a file {@link #write} wrote.
   *
   * @throws IllegalArgumentException naming the line when a line is not a trace row
   */
  public static ScratchTrace read(Path file) throws IOException {
    List<Node> out = new ArrayList<>();
    int no = 0;
    for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
      no++;
      if (line.isBlank() || line.startsWith("#")) {
        continue;
      }
      String[] f = line.split("\t", -1);
      try {
        if (f.length != 7) {
          throw new NumberFormatException("7 fields expected, got " + f.length);
        }
        out.add(new Node(f[1], f[2], Long.parseLong(f[0]), Long.parseLong(f[3]),
            Long.parseLong(f[4]), Long.parseLong(f[5]), Long.parseLong(f[6])));
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(file + ":" + no + ": not a trace row ("
            + e.getMessage() + ")");
      }
    }
    return new ScratchTrace(out);
  }

  /** The op type in a step-stats timeline label ({@code "name = Type(inputs)"}), or "". */
  static String opType(String label) {
    int eq = label.indexOf(" = ");
    int paren = eq < 0 ? -1 : label.indexOf('(', eq + 3);
    return eq < 0 || paren < 0 ? "" : label.substring(eq + 3, paren).trim();
  }
}
