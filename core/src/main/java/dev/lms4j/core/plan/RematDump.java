package dev.lms4j.core.plan;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.Rematerializer.Decision;
import dev.lms4j.core.plan.Rematerializer.Result;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;

/**
 * The dump of a {@link Rematerializer} run (XLA's rematerialization dump in spirit): per-op
 * memory on the rewritten schedule and the decision log, as JSON ({@code lms4j-remat-dump/1})
 * or tab-separated text.
 */
final class RematDump {
  private RematDump() {}

  /** Writes {@code r} to {@code file}: JSON when its name ends in {@code .json}, else text. */
  static void write(Result r, Path file) {
    DataflowGraph rw = RecomputeApplier.apply(r.graph(), r.plan());
    int[] order = Levels.of(rw).schedule();
    MemoryProfile prof = MemorySimulator.simulate(rw, order);
    Set<String> remat = new HashSet<>();
    r.plan().groups().forEach(gr -> remat.addAll(gr.ops()));
    String mode = r.options().mode().name().toLowerCase(Locale.ROOT);
    try {
      if (file.getParent() != null) {
        Files.createDirectories(file.getParent());
      }
      if (file.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(".json")) {
        ObjectMapper om = new ObjectMapper();
        ObjectNode root = om.createObjectNode();
        root.put("schema", "lms4j-remat-dump/1").put("mode", mode)
            .put("limit_bytes", r.limitBytes()).put("peak_before_bytes", r.peakBefore())
            .put("peak_after_bytes", r.peakAfter()).put("fits", r.fits())
            .put("simulations", r.simulations()).put("recomputed_ops", r.plan().clonedOps());
        ArrayNode ops = root.putArray("ops");
        for (int i = 0; i < order.length; i++) {
          Op op = rw.op(order[i]);
          ops.addObject().put("pos", i).put("op", op.name()).put("type", op.type())
              .put("category", op.category().name().toLowerCase(Locale.ROOT))
              .put("live_bytes", prof.timeline()[i]).put("status", status(op, remat));
        }
        ArrayNode ds = root.putArray("decisions");
        for (Decision d : r.decisions()) {
          ObjectNode n = ds.addObject().put("step", d.step()).put("action", d.action())
              .put("estimated_bytes", d.estimatedBytes()).put("cost_us", d.costUs())
              .put("peak_bytes", d.peakBytes());
          d.ops().forEach(n.putArray("ops")::add);
        }
        om.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), root);
      } else {
        StringBuilder sb = new StringBuilder();
        sb.append("# lms4j remat dump: mode ").append(mode).append(", limit ")
            .append(r.limitBytes()).append(" B, peak ").append(r.peakBefore()).append(" B -> ")
            .append(r.peakAfter()).append(" B, ").append(r.plan().clonedOps())
            .append(" ops recomputed, ").append(r.simulations()).append(" simulations\n");
        sb.append("pos\top\ttype\tcategory\tlive_bytes\tstatus\n");
        for (int i = 0; i < order.length; i++) {
          Op op = rw.op(order[i]);
          sb.append(i).append('\t').append(op.name()).append('\t').append(op.type())
              .append('\t').append(op.category().name().toLowerCase(Locale.ROOT))
              .append('\t').append(prof.timeline()[i]).append('\t')
              .append(status(op, remat)).append('\n');
        }
        sb.append("\n# decisions\nstep\taction\tops\testimated_bytes\tcost_us\tpeak_bytes\n");
        for (Decision d : r.decisions()) {
          sb.append(d.step()).append('\t').append(d.action()).append('\t')
              .append(String.join(",", d.ops())).append('\t').append(d.estimatedBytes())
              .append('\t').append(String.format(Locale.ROOT, "%.1f", d.costUs()))
              .append('\t').append(d.peakBytes()).append('\n');
        }
        Files.writeString(file, sb);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the remat dump " + file, e);
    }
  }

  private static String status(Op op, Set<String> remat) {
    if (op.name().startsWith(RematStandard.CLONE_PREFIX)) {
      return "clone";
    }
    return remat.contains(op.name()) ? "rematerialized" : "kept";
  }
}
