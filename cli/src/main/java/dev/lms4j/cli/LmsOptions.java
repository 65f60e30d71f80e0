package dev.lms4j.cli;

import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.schedule.Scheduling;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsBuilder;
import dev.lms4j.core.report.Sizes;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import picocli.CommandLine.Option;

/** LMS options shared by the commands: mode, budget and TFLMS's parameters. */
final class LmsOptions {
  @Option(names = "--budget", paramLabel = "SIZE",
      description = "Device memory budget: 512MiB, 2GiB, 1.5GB or bytes. Runs are made in a "
          + "worker JVM whose TensorFlow allocator is limited to it.")
  String budget;

  @Option(names = "--lms", paramLabel = "MODE",
      description = "One of: ${COMPLETION-CANDIDATES}; default: auto with --budget or TFLMS "
          + "parameters, else off (none is taken for off). Run `lms4j models` or see the "
          + "README for what each does: tflms is TFLMS's swap planner (auto-tuned unless "
          + "parameters are given); swap the cost-based planner restricted to swapping; remat "
          + "grappler-style recompute groups "
          + "(remat-xla and remat-path: XLA-style rematerialization); auto the best of the "
          + "cost-based hybrid and the recompute+TFLMS baseline by predicted step time; sqrt "
          + "Chen et al.'s sqrt(n) checkpointing (a baseline).",
      completionCandidates = ModeNames.class)
  String lms;

  @Option(names = "--swapout-threshold", defaultValue = "-1",
      description = "TFLMS swapout_threshold: swap a tensor whose consumer is more than this "
          + "many levels after its producer (-1: auto-tune).")
  int swapoutThreshold;

  @Option(names = "--swapin-ahead", defaultValue = "-1",
      description = "TFLMS swapin_ahead: start a swap-in at least this many levels before its "
          + "consumer (-1: auto-tune).")
  int swapinAhead;

  @Option(names = "--swapin-groupby", defaultValue = "-1",
      description = "TFLMS swapin_groupby: consumers within this many levels share one "
          + "swap-in (-1: auto-tune).")
  int swapinGroupby;

  @Option(names = "--sync-mode", defaultValue = "0",
      description = "TFLMS sync_mode: 0 async, 1 sync swap-out, 2 sync swap-in, 3 both.")
  int syncMode;

  @Option(names = "--serialization", split = ",", paramLabel = "SLICE",
      description = "Level slices to serialize, e.g. 1,3:5,7: (end exclusive).")
  List<String> serialization = List.of();

  @Option(names = "--serialization-by-size", defaultValue = "0", paramLabel = "GiB",
      description = "Serialize levels whose tensors sum to more than this many GiB (0: off).")
  double serializationBySize;

  @Option(names = "--excl-output-scopes", split = ",", paramLabel = "SCOPE",
      description = "TFLMS exclude_output_scopes: never swap tensors made by ops under these "
          + "name scopes.")
  Set<String> exclOutputScopes = Set.of();
  @Option(names = "--excl-output-types", split = ",", paramLabel = "TYPE",
      description = "TFLMS exclude_output_types: never swap tensors made by ops of these types.")
  Set<String> exclOutputTypes = Set.of();
  @Option(names = "--incl-output-scopes", split = ",", paramLabel = "SCOPE",
      description = "TFLMS include_output_scopes: swap only tensors made by ops under these "
          + "name scopes.")
  Set<String> inclOutputScopes = Set.of();
  @Option(names = "--incl-output-types", split = ",", paramLabel = "TYPE",
      description = "TFLMS include_output_types: swap only tensors made by ops of these types.")
  Set<String> inclOutputTypes = Set.of();
  @Option(names = "--excl-input-scopes", split = ",", paramLabel = "SCOPE",
      description = "TFLMS exclude_input_scopes: consumers under these name scopes read the "
          + "original tensor, never a swap-in.")
  Set<String> exclInputScopes = Set.of();
  @Option(names = "--excl-input-types", split = ",", paramLabel = "TYPE",
      description = "TFLMS exclude_input_types: consumers of these types read the original "
          + "tensor, never a swap-in.")
  Set<String> exclInputTypes = Set.of();
  @Option(names = "--incl-input-scopes", split = ",", paramLabel = "SCOPE",
      description = "TFLMS include_input_scopes: only consumers under these name scopes read a "
          + "swap-in.")
  Set<String> inclInputScopes = Set.of();
  @Option(names = "--incl-input-types", split = ",", paramLabel = "TYPE",
      description = "TFLMS include_input_types: only consumers of these types read a swap-in.")
  Set<String> inclInputTypes = Set.of();

  @Option(names = "--tier", defaultValue = "host",
      description = "Where swapped tensors go: host | disk | device-placement (GPU builds only).")
  String tier;

  @Option(names = "--swap-dir", description = "Directory for --tier disk (default: a temp dir).")
  Path swapDir;

  @Option(names = "--swap-path", defaultValue = "auto", paramLabel = "PATH",
      description = "How swapped tensors move: native (lms4j's C swap ops: one copy each way, "
          + "outside the budget) | standard (SerializeTensor/ParseTensor, WriteFile/ReadFile) | "
          + "auto (default: native when its library loads here, else standard).")
  String swapPath;

  @Option(names = "--swap-overlap",
      description = "Native path: swap-outs copy on a native thread while compute goes on.")
  boolean swapOverlap;

  @Option(names = "--mem-ratio", paramLabel = "RATIO",
      description = "Share of the budget the simulated peak may use (TFLMS's "
          + "TF_LMS_SIMULATOR_MEM_RATIO, 0.9 there). Default 0.95 where the plan's first step "
          + "is probed under the budget (run and train; the probe measures what the memory "
          + "model misses and re-plans), 0.8 where nothing checks the plan (analyze, rewrite, "
          + "--no-probe): kernel scratch, fragmentation and the model's misses need the rest; "
          + "where no plan keeps that margin, plans at 0.95 are judged by the allocator check. "
          + "A ratio given here is kept.")
  Double memRatio;

  @Option(names = "--remat-mode", paramLabel = "MODE", defaultValue = "groups",
      description = "How --lms remat chooses ops: groups (grappler-style groups of cheap ops, "
          + "the default) | standard (XLA's rematerialization: best bytes saved per recompute "
          + "cost at the peak, in growing blocks) | path (whole paths, then articulation ops "
          + "kept while within the budget).")
  String rematMode;

  @Option(names = "--small-node-limit", paramLabel = "MiB", defaultValue = "0",
      description = "remat standard/path: tensors smaller than this many MiB are never "
          + "recomputed (default ${DEFAULT-VALUE}).")
  double smallNodeLimit;

  @Option(names = "--scheduler", paramLabel = "NAME", defaultValue = "none",
      description = "Scheduling step before planning, for every --lms mode: none (default) | "
          + "postorder | dfs | list | best. AddN ops become chains that add gradients as they "
          + "arrive, and the scheduler's order is enforced with control edges where needed "
          + "(kept only when it lowers the simulated peak; where the graph lms4j writes would "
          + "close a cycle through a filter gradient oneDNN merges with its bias gradient, "
          + "the plan is made again without the schedule).")
  String scheduler;

  @Option(names = "--no-gradient-sums",
      description = "Leave large gradient sums (an AddN of 4 or more partial gradients, 1 MiB "
          + "or more, e.g. of an unrolled RNN's shared weights) as they are. By default every "
          + "planning mode first turns them into running accumulations in input order "
          + "(bit-identical sums), so each partial gradient is freed as it is added.")
  boolean noGradientSums;

  @Option(names = "--no-optimizer-edges",
      description = "Keep the control edges TF Java's framework optimizers put from every "
          + "gradient on every update. By default every planning mode first relaxes them: an "
          + "update waits for its own gradient and for the step's reads of its variable only.")
  boolean noOptimizerEdges;

  @Option(names = "--no-sparse-updates",
      description = "Leave a gradient-descent update of a gathered table (an embedding) by its "
          + "dense, table-sized gradient as it is. By default every planning mode first turns it "
          + "into an update of the rows looked up (bit-identical), so a step no longer holds a "
          + "second table.")
  boolean noSparseUpdates;

  @Option(names = "--no-slot-offload",
      description = "Keep an optimizer's slots (Adam's moments, momentum) on the device. By "
          + "default, where no plan fits with them there, planning modes try again with each "
          + "slot kept in host memory between its updates (bit-identical; two copies of its "
          + "bytes per step).")
  boolean noSlotOffload;

  @Option(names = "--no-weight-offload",
      description = "Keep the weights on the device. By default, where no plan fits even with "
          + "the optimizer's slots on the host, planning modes try again with each weight that "
          + "one update of the step changes in place kept in host memory and parsed right "
          + "before each op that reads it (bit-identical; a copy of its bytes per read and two "
          + "per update, per step). --no-slot-offload turns this off too.")
  boolean noWeightOffload;

  @Option(names = "--no-init-constants",
      description = "Let TensorFlow fold large zero or constant initializer Fills (e.g. "
          + "optimizer slots) into constants that it holds for the session's life.")
  boolean noInitConstants;

  @Option(names = "--serial-order", negatable = true, defaultValue = "true",
      fallbackValue = "true",
      description = "Run a rewritten graph's ops in one fixed order (on by default; "
          + "--no-serial-order turns it off): control edges chain the step's ops in the order "
          + "the plan was simulated in and the init op's in graph order, so the graph needs the "
          + "same memory in every run (TensorFlow's own order varies from process to process). "
          + "The ops TensorFlow fuses or "
          + "removes stay out of the chain, so the losses are the unchained graph's, bit for "
          + "bit. A graph left as given is never chained.")
  boolean serialOrder;

  @Option(names = "--recompute", split = ",", paramLabel = "OP",
      description = "Manual recomputation: recompute these forward ops, by name, in the "
          + "backward pass, as ops carrying the _recompute_hint attribute are, in every --lms "
          + "mode (the mode plans the rest); without --lms it means --lms remat: only these. "
          + "Random, stateful, fed, variable and constant ops cannot be named.")
  List<String> recompute = List.of();

  @Option(names = "--backward-scope", paramLabel = "SCOPE", defaultValue = "gradients",
      description = "Name scope of the backward pass's ops (default ${DEFAULT-VALUE}): the ops "
          + "that read swapped-in or recomputed tensors, and whose inputs count as "
          + "activations.")
  String backwardScope;

  @Option(names = "--remat-dump", paramLabel = "FILE",
      description = "remat standard/path: write per-op memory and the decisions here "
          + "(JSON when FILE ends in .json, else tab-separated).")
  Path rematDump;

  @Option(names = "--profile", paramLabel = "FILE",
      description = "Measured op times for the cost model that swap, auto and remat standard/path "
          + "plan with, instead of FLOP estimates: the per-op trace of a step as "
          + "LMS4J_DUMP_TRACE=FILE writes it (e.g. LMS4J_DUMP_TRACE=trace.tsv lms4j run --model "
          + "resnet50 --steps 3). Ops missing from it keep their estimate.")
  Path profile;

  /**
   * The trace {@code --profile} names, read once: options are checked before and after a model
   * is built, and the cost model reads the trace too.
   */
  private Map<String, Double> profiled;

  @Option(names = "--dump-dot", paramLabel = "DIR",
      description = "Write the graph before and after the rewrite as Graphviz files "
          + "DIR/before.dot and DIR/after.dot, swapped and recomputed ops marked (XLA's "
          + "--xla_rematerialization_dump_dot). Render with: dot -Tsvg DIR/after.dot > after.svg")
  Path dumpDot;

  @Option(names = "--debug", description = "Log the plan in detail.") boolean debug;

  @Option(names = "--debug-level", defaultValue = "1", description = "1 or 2.") int debugLevel;

  LmsMode mode() {
    if (lms == null && !recompute.isEmpty()) {
      // ops named without a mode: recompute them, and only them (as the _recompute_hint does)
      return LmsMode.REMAT;
    }
    if (lms == null) {
      // nothing to plan against: without a budget or TFLMS parameters, run the graph as it is
      boolean tflmsParams = swapoutThreshold >= 0 || swapinAhead >= 0 || swapinGroupby >= 0;
      return budget == null && !tflmsParams ? LmsMode.OFF : LmsMode.AUTO;
    }
    LmsMode m;
    try {
      m = LmsMode.parse(lms);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("unknown --lms mode '" + lms + "' (expected "
          + LmsMode.cliNames() + ")");
    }
    if (m == LmsMode.REMAT) {
      return switch (rematMode()) {
        case "standard" -> LmsMode.REMAT_XLA;
        case "path" -> LmsMode.REMAT_PATH;
        default -> LmsMode.REMAT;
      };
    }
    return m;
  }

  /** The mode names {@code --lms} accepts, for picocli's help. */
  static final class ModeNames implements Iterable<String> {
    @Override
    public java.util.Iterator<String> iterator() {
      return java.util.Arrays.stream(LmsMode.values()).filter(LmsMode::userFacing)
          .map(LmsMode::cliName).iterator();
    }
  }

  Lms lms(int batch) {
    SwapParams p = params(batch);
    LmsBuilder b = ratio(Lms.builder().params(p)).mode(mode());
    if (budgetBytes() > 0) {
      b.budget(budgetBytes());
    }
    if (swapDir != null) {
      b.swapDir(swapDir);
    }
    return configure(b).build();
  }

  /** Sets {@code --mem-ratio} on {@code b} when it was given (else the builder's default). */
  LmsBuilder ratio(LmsBuilder b) {
    return memRatio == null ? b : b.memRatio(memRatio);
  }

  /** The memory ratio plans are made at: {@code --mem-ratio}, or the builder's default. */
  double effectiveMemRatio() {
    return ratio(Lms.builder()).serialOrder(serialOrder).memRatio();
  }

  /**
   * Sets the swap path and overlap, the remat mode, small-node limit, scheduler, dump file and
   * the cost model (with the measured op times of {@code --profile}) on {@code b}.
   */
  LmsBuilder configure(LmsBuilder b) {
    b.swapPath(dev.lms4j.tf.SwapPath.parse(swapPath)).swapOverlap(swapOverlap);
    b.gradientSums(!noGradientSums).optimizerEdges(!noOptimizerEdges)
        .initConstants(!noInitConstants).sparseUpdates(!noSparseUpdates)
        .slotOffload(!noSlotOffload).weightOffload(!noWeightOffload).serialOrder(serialOrder);
    b.smallNodeLimitBytes(smallNodeLimitBytes())
        .scheduler(Scheduling.Scheduler.parse(scheduler)).backwardScope(backwardScope());
    if (!recompute.isEmpty()) {
      b.recompute(recompute);
    }
    if (rematDump != null) {
      b.rematDump(rematDump);
    }
    if (dumpDot != null) {
      b.dumpDot(dumpDot);
    }
    if (profile != null) {
      b.costModel(CostModel.defaults().withProfile(profileUs()));
    }
    return b;
  }

  /** The op times of {@code --profile}, microseconds by op name; throws when none can be read. */
  Map<String, Double> profileUs() {
    if (profiled == null) {
      profiled = loadProfile();
    }
    return profiled;
  }

  private Map<String, Double> loadProfile() {
    if (Files.isDirectory(profile)) {
      throw new IllegalArgumentException("--profile " + profile + " is a directory, not a trace");
    }
    if (!Files.isRegularFile(profile)) {
      throw new IllegalArgumentException("--profile " + profile + ": no such file");
    }
    Map<String, Double> us;
    try {
      us = CostModel.loadTrace(profile);
    } catch (java.io.UncheckedIOException e) {
      throw new IllegalArgumentException("--profile " + profile + " is not a trace (expected "
          + "the tab-separated text LMS4J_DUMP_TRACE writes): " + e.getCause().getMessage());
    }
    if (us.isEmpty()) {
      throw new IllegalArgumentException("--profile " + profile + ": no op times in it (expected "
          + "the tab-separated trace LMS4J_DUMP_TRACE writes)");
    }
    return us;
  }

  String rematMode() {
    String m = rematMode.trim().toLowerCase(java.util.Locale.ROOT);
    if (!m.equals("groups") && !m.equals("standard") && !m.equals("path")) {
      throw new IllegalArgumentException("unknown --remat-mode '" + rematMode
          + "' (expected groups, standard or path)");
    }
    return m;
  }

  String backwardScope() {
    String s = backwardScope.trim();
    while (s.endsWith("/")) {
      s = s.substring(0, s.length() - 1);
    }
    if (s.isEmpty()) {
      throw new IllegalArgumentException("--backward-scope must name a scope, e.g. gradients");
    }
    return s;
  }

  long smallNodeLimitBytes() {
    if (!(smallNodeLimit >= 0) || Double.isInfinite(smallNodeLimit)) {
      throw new IllegalArgumentException("--small-node-limit must be a number of MiB >= 0");
    }
    return (long) (smallNodeLimit * 1048576);
  }

  long budgetBytes() {
    long b = budget == null ? 0 : Sizes.parse(budget);
    if (b > 0 && b < 1 << 20) {
      // TF_CPU_BFC_MEM_LIMIT_IN_MB takes whole MiB
      throw new IllegalArgumentException("--budget " + budget + " is below 1 MiB, the smallest "
          + "budget TensorFlow's allocator limit can express");
    }
    return b;
  }

  SwapParams params(int batch) {
    return SwapParams.builder().swapoutThreshold(swapoutThreshold).swapinAhead(swapinAhead)
        .swapinGroupby(swapinGroupby).syncMode(syncMode).serialization(serialization)
        .serializationBySize(serializationBySize)
        .exclOutputByScopes(exclOutputScopes).exclOutputByTypes(exclOutputTypes)
        .inclOutputByScopes(inclOutputScopes).inclOutputByTypes(inclOutputTypes)
        .exclInputByScopes(exclInputScopes).exclInputByTypes(exclInputTypes)
        .inclInputByScopes(inclInputScopes).inclInputByTypes(inclInputTypes)
        .tier(Tier.parse(tier)).batchSize(batch > 0 ? batch : -1).debug(debug)
        .debugLevel(debugLevel).build();
  }

  /**
   * Checks every value that does not depend on the graph, before a model is built or loaded
   * (which loads TensorFlow, whose start-up lines would come before the one-line error).
   */
  void validateOptions() {
    validate(0);
  }

  /** Checks every value; throws IllegalArgumentException on the first bad one. */
  void validate(int batch) {
    mode();
    budgetBytes();
    params(batch);
    rematMode();
    smallNodeLimitBytes();
    Scheduling.Scheduler.parse(scheduler);
    backwardScope();
    if (!recompute.isEmpty() && mode() == LmsMode.OFF) {
      throw new IllegalArgumentException("--recompute names ops to recompute: it needs an LMS "
          + "mode, not --lms off");
    }
    if (recompute.stream().anyMatch(n -> n.isBlank())) {
      throw new IllegalArgumentException("--recompute: empty op name");
    }
    if (mode().needsBudget() && budgetBytes() <= 0
        && (mode() == LmsMode.REMAT_XLA || mode() == LmsMode.REMAT_PATH)) {
      throw new IllegalArgumentException("--lms " + mode().cliName() + " needs --budget");
    }
    dev.lms4j.tf.SwapPath.parse(swapPath);
    if (profile != null) {
      profileUs();
    }
    if (dumpDot != null && Files.exists(dumpDot) && !Files.isDirectory(dumpDot)) {
      throw new IllegalArgumentException("--dump-dot " + dumpDot + " is a file, not a directory");
    }
    if (memRatio != null && !(memRatio > 0 && memRatio <= 1)) {
      throw new IllegalArgumentException("--mem-ratio must be in (0, 1]");
    }
    if (debugLevel < 1 || debugLevel > 2) {
      throw new IllegalArgumentException("--debug-level must be 1 or 2, not " + debugLevel);
    }
    if (swapDir != null) {
      Paths.checkDirectory(swapDir, "--swap-dir");
    }
  }
}
