package dev.lms4j.cli;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.report.Report;
import dev.lms4j.tf.LmsResult;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Report file handling shared by the commands. */
final class Reports {
  private Reports() {}

  /** Fails early (bad input) when the report's directory does not exist. */
  static void checkWritable(Path file) {
    if (file == null) {
      return;
    }
    Path dir = file.toAbsolutePath().getParent();
    if (dir == null || !Files.isDirectory(dir)) {
      throw new IllegalArgumentException("cannot write " + file + ": no such directory " + dir);
    }
    if (Files.isDirectory(file)) {
      throw new IllegalArgumentException("cannot write " + file + ": it is a directory");
    }
    if (!Files.isWritable(dir)) {
      throw new IllegalArgumentException("cannot write " + file + ": the directory " + dir
          + " is not writable");
    }
    if (Files.exists(file) && !Files.isWritable(file)) {
      throw new IllegalArgumentException("cannot write " + file + ": it is read-only");
    }
  }

  /** Fills the graph, plan and predicted-peak sections from an LMS result. */
  static void lms(Report r, LmsResult lms, ObjectNode parameters) {
    r.graph(lms.stats().ops(), lms.stats().tensors(), lms.stats().parameterBytes());
    r.plan(lms.plan().swapOuts().size(), lms.plan().swapInCount(), lms.plan().swapOutBytes(),
        lms.recompute().clonedOps(), lms.recompute().bytes(), lms.planningMs(), parameters);
    r.predicted(lms.predictedPeakBefore(), lms.predictedPeakAfter());
    if (lms.scheduling() != null) {
      var s = lms.scheduling();
      r.extra("scheduling").put("schedule", s.kind().name().toLowerCase(java.util.Locale.ROOT))
          .put("addn_chains", s.chains().size()).put("control_edges", s.edges().size())
          .put("peak_before_bytes", s.peakBefore()).put("peak_after_bytes", s.peakAfter());
    }
    if (lms.preRewrites().changed()) {
      var p = lms.preRewrites();
      r.extra("pre_rewrites").put("gradient_sums", p.gradientSums())
          .put("optimizer_edges_removed", p.optimizerEdgesRemoved())
          .put("optimizer_edges_added", p.optimizerEdgesAdded())
          .put("init_constants", p.initConstants())
          .put("init_constant_bytes", p.initConstantBytes())
          .put("sparse_updates", p.sparseUpdates())
          .put("sparse_update_bytes", p.sparseUpdateBytes())
          .put("offloaded_slots", p.offloadedSlots())
          .put("offloaded_slot_bytes", p.offloadedBytes())
          .put("offloaded_weights", p.offloadedWeights())
          .put("offloaded_weight_bytes", p.offloadedWeightBytes())
          .put("peak_after_bytes", p.peakAfter());
    }
    if (lms.initLayout() != null) {
      var l = lms.initLayout();
      ObjectNode n = r.extra("init_order");
      var last = n.putArray("created_last");
      l.last().forEach(last::add);
      n.put("primer_bytes", l.primerBytes()).put("primer_first", l.primerFirst())
          .put("allocator_need_before_bytes", l.needBefore())
          .put("allocator_need_after_bytes", l.needAfter());
    }
    if (!lms.plan().swapOuts().isEmpty()) {
      // which mechanism moves the swapped tensors (docs/native-swap.md)
      r.extra("swap").put("path", dev.lms4j.tf.NativeSwap.uses(lms.graphDef()) ? "native"
          : "standard");
    }
  }

  /**
   * The probe's section: the verdict, the re-plans, and each try with its graph, planner,
   * memory ratio, predicted peak and what was measured.
   */
  static void probe(Report r, dev.lms4j.tf.run.Probe.Outcome po) {
    ObjectNode p = r.extra("probe");
    p.put("verdict", po.verdict().name().toLowerCase(java.util.Locale.ROOT))
        .put("tries", po.attempts().size()).put("replans", po.replans())
        .put("message", po.message());
    if (po.smallestBudgetBytes() > 0) {
      p.put("smallest_budget_bytes", po.smallestBudgetBytes());
    }
    var arr = p.putArray("attempts");
    for (var a : po.attempts()) {
      ObjectNode n = arr.addObject().put("try", a.number()).put("graph", a.graph())
          .put("planner", a.planner());
      if (!Double.isNaN(a.memRatio())) {
        n.put("mem_ratio", a.memRatio());
      }
      n.put("predicted_peak_bytes", a.predictedPeakBytes()).put("fits", a.fits())
          .put("oom", a.oom()).put("measured_peak_bytes", a.measuredPeakBytes());
      if (a.failedAllocationBytes() > 0) {
        n.put("failed_allocation_bytes", a.failedAllocationBytes());
      }
      if (a.tighterLimitBytes() > 0) {
        n.put("tighter_limit_bytes", a.tighterLimitBytes()).put("tighter_fits", a.tighterFits());
      }
      if (a.error() != null) {
        n.put("error", a.error());
      }
    }
  }

  /** Writes the report when a file was asked for. */
  static void write(Report r, Path file) throws IOException {
    if (file != null) {
      r.write(file);
      System.out.println("Report: " + file);
    }
  }
}
