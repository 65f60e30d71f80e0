package dev.lms4j.tf;

import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.plan.Budget;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.schedule.Scheduling;
import java.nio.file.Path;
import java.util.Collection;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Builder for {@link Lms}: every setting has a default; the mode defaults to {@code auto} when a
 * budget (or TFLMS parameters) is set, else {@code off}.
 *
 * <pre>{@code
 * Lms lms = Lms.builder().budget(512L << 20).mode(LmsMode.SWAP).swapPath(SwapPath.NATIVE).build();
 * }</pre>
 */
public final class LmsBuilder implements Cloneable {
  /**
   * A memory ratio the fixed order ({@link #serialOrder(boolean)}) allows where the memory model
   * is close: 0.95. The allocator check accepts a plan only where its replay through the BFC
   * allocator model leaves 5% of the budget free, and in a fixed order the graph needs the same
   * memory in every run. Measured in the acceptance suite (zoo lenet, resnet, gpt2 and the eleven
   * corpus families, 28 budgets at 60 and 85% of what the allocator model says each graph needs),
   * in a fixed order: at 0.95, 21 plans accepted, none ran out of memory without the probe or
   * after it, 1 re-plan by the probe; at 0.8, 20 accepted, and zoo resnet b32 at 122 MiB refused,
   * where 0.95 trains. The default where a probe checks the plan under the budget
   * ({@code dev.lms4j.tf.run.Probe#PROBED_MEM_RATIO}: {@code run}, {@code train} and the LMS
   * callback); not the default of a plan nothing checks ({@link Budget#DEFAULT_MEM_RATIO}, 0.8, is:
   * {@code analyze}, {@code rewrite}, {@link Lms#rewrite}), where the model's misses go unseen
   * (the zoo LeNet at 88 MiB, whose memory the model puts 11% low, traces 87.2 MiB there); but
   * where planning at that default is refused, {@link Lms#rewrite} plans at this ratio too and
   * the allocator check judges those plans (with the check on, a budget set, and a mode whose
   * plan depends on the budget). Set it with {@link #memRatio(double)}
   * ({@code --mem-ratio 0.95}); a ratio set is kept as given.
   */
  public static final double ORDERED_MEM_RATIO = 0.95;

  long budgetBytes;
  SwapParams params = SwapParams.defaults();
  /** NaN: not set ({@link #memRatio()} gives the default). */
  double memRatio = Double.NaN;
  String backwardScope = GraphImporter.DEFAULT_BACKWARD_SCOPE;
  Path swapDir;
  LmsMode mode;
  CostModel costModel = CostModel.defaults();
  long smallNodeLimitBytes;
  Scheduling.Scheduler scheduler = Scheduling.Scheduler.NONE;
  Path rematDump;
  SwapPath swapPath = SwapPath.AUTO;
  boolean swapOverlap;
  Set<String> recomputeOps = Set.of();
  Path dumpDot;
  GradientSums.Options gradientSums = GradientSums.Options.defaults();
  boolean optimizerEdges = true;
  boolean initConstants = true;
  boolean sparseUpdates = true;
  boolean slotOffload = true;
  boolean weightOffload = true;
  /** Set on the copy that plans again with the slots offloaded ({@link Lms}). */
  boolean offloadNow;
  /** Set on the copy that plans again with the weights offloaded too ({@link Lms}). */
  boolean weightsNow;
  boolean allocatorCheck = true;
  boolean serialOrder = true;
  Map<String, Long> scratch = Map.of();

  LmsBuilder() {}

  /**
   * Whether large gradient sums become running accumulations before planning (default on,
   * {@link GradientSums.Options#defaults()}: sums of 4 or more inputs holding 1 MiB or more,
   * added in input order, which keeps them bit-identical). Every mode that plans then sees the
   * rewritten sums, and the floor is computed after the rewrite. Off: {@code --no-gradient-sums}.
   */
  public LmsBuilder gradientSums(boolean on) {
    this.gradientSums = on ? GradientSums.Options.defaults() : null;
    return this;
  }

  /** Rewrites gradient sums before planning with these options ({@link GradientSums}). */
  public LmsBuilder gradientSums(GradientSums.Options o) {
    this.gradientSums = Objects.requireNonNull(o);
    return this;
  }

  /**
   * Whether the control edges that TF Java's framework optimizers put from every gradient on
   * every update are relaxed before planning (default on, {@link OptimizerEdges}): an update
   * then waits only for its own gradient and for the step's reads of its variable, so weight
   * gradients need not all be alive at once. Needs the ops a step runs (a
   * {@link TrainingGraph}, the run ops, or a train op); without them the edges are left alone.
   * Off: {@code --no-optimizer-edges}.
   */
  public LmsBuilder optimizerEdges(boolean on) {
    this.optimizerEdges = on;
    return this;
  }

  /**
   * Whether large initializer {@code Fill}s outside the step (a zero-initialised slot or bias;
   * also {@code ZerosLike}/{@code OnesLike} of a known shape) are kept from grappler's constant
   * folding before planning (default on,
   * {@link InitConstants}): folded, each becomes a constant that the {@code init} run's cached
   * executor holds for the session's life, memory every training step then lacks. Needs the ops
   * a step runs (a {@link TrainingGraph}, the run ops, or a train op); without them the graph
   * is left alone. Off: {@code --no-init-constants}.
   */
  public LmsBuilder initConstants(boolean on) {
    this.initConstants = on;
    return this;
  }

  /**
   * Whether a plain gradient-descent update of a gathered table by its dense, table-sized
   * gradient is turned into an update of the rows looked up before planning (default on,
   * {@link SparseUpdates}; bit-identical): TF Java's gradient of a gather is a dense
   * {@code UnsortedSegmentSum} as large as the table, which the step then no longer computes.
   * Off: {@code --no-sparse-updates}.
   */
  public LmsBuilder sparseUpdates(boolean on) {
    this.sparseUpdates = on;
    return this;
  }

  /**
   * Whether an optimizer's slots may be kept in host memory between their updates
   * ({@link SlotOffload}; default on, bit-identical): where no plan fits the budget with every
   * slot on the device, the graph is planned again with each qualifying slot brought in just
   * before its update and sent back right after it (two copies of its bytes per step). Needs the
   * ops a step runs. Off: {@code --no-slot-offload}.
   */
  public LmsBuilder slotOffload(boolean on) {
    this.slotOffload = on;
    return this;
  }

  /**
   * Whether weights may be kept in host memory between their uses ({@link SlotOffload} with
   * weights; default on, bit-identical): where no plan fits even with the optimizer's slots on
   * the host (or there are none), the graph is planned again with each qualifying weight (a
   * variable updated in place by one update of the step, read before it) parsed from its host
   * copy right before each op that reads it, and brought in around its update as a slot is (a
   * copy of its bytes per read and two per update, per step). Needs slot offload on. Off:
   * {@code --no-weight-offload}.
   */
  public LmsBuilder weightOffload(boolean on) {
    this.weightOffload = on;
    return this;
  }

  /**
   * Whether an accepted plan is checked against a model of TensorFlow's BFC allocator at the
   * whole budget (default on, {@code AllocatorCheck}): where the allocator's whole chunks and
   * regions need more than the budget, the graph is planned again at a lower memory ratio, and
   * where no plan fits but the graph as given does, it is left as it was. Off: the planners'
   * simulated peak under the memory ratio alone decides, as before.
   */
  public LmsBuilder allocatorCheck(boolean on) {
    this.allocatorCheck = on;
    return this;
  }

  /**
   * Whether a rewritten training graph ({@link Lms#rewrite(TrainingGraph)}) runs its step and
   * its init op in a fixed order ({@link SerialOrder}; default on): control edges chain the
   * step's ops in the order the plan was simulated in, and init's ops in the graph's order.
   * Without them TensorFlow's order, and with it where tensors land in the allocator, varies
   * from process to process, so a plan that trained in the probe can run out of memory in the
   * next run (measured: the corpus U-Net's auto plan for 17 MiB passed the probe at a traced
   * 13.6 MiB and ran out of memory in 6 of 8 later runs); with them the graph needs the same
   * memory every time (5 runs of 5 at a traced 14.1 MiB). The ops TensorFlow fuses or removes only where no control edge
   * holds them stay out of the chain ({@link UnchainedOps}), so it runs the same kernels and the
   * losses are the unchained graph's bit for bit. TensorFlow runs ops in the caller's thread in
   * lms4j's sessions ({@link SessionConfigs#lms()}), so no parallelism is lost there. A graph
   * left as given is never chained. Off: {@code --no-serial-order}.
   */
  public LmsBuilder serialOrder(boolean on) {
    this.serialOrder = on;
    return this;
  }

  /**
   * Writes the graph before and after the rewrite to {@code before.dot} and {@code after.dot}
   * in this directory, swapped and recomputed ops marked ({@link DotDump}).
   */
  public LmsBuilder dumpDot(Path dir) {
    this.dumpDot = dir;
    return this;
  }

  /**
   * The mode (default: {@link LmsMode#AUTO} when a budget or TFLMS parameters are set, else
   * {@link LmsMode#OFF}). {@code auto} and {@code swap} with TFLMS parameters set by hand plan
   * with TFLMS.
   */
  public LmsBuilder mode(LmsMode m) {
    this.mode = Objects.requireNonNull(m);
    return this;
  }

  /**
   * Manual recomputation, the Java counterpart of the {@code _recompute_hint} attribute: these
   * forward ops (by name) are recomputed in the backward pass, in connected groups, together
   * with the ops marked by the attribute, in every mode (with {@link LmsMode#REMAT} only
   * these, whatever the budget). Random, stateful, fed, variable and constant ops cannot be
   * named ({@link #build} succeeds, {@link Lms#rewrite} throws IllegalArgumentException).
   *
   * <pre>{@code
   * Lms.builder().mode(LmsMode.REMAT).recompute(Set.of("relu1", "bias1")).build();
   * }</pre>
   */
  public LmsBuilder recompute(Collection<String> opNames) {
    this.recomputeOps = Set.copyOf(opNames);
    return this;
  }

  /** Tensors smaller than this are never rematerialized (the XLA-style modes). */
  public LmsBuilder smallNodeLimitBytes(long bytes) {
    if (bytes < 0) {
      throw new IllegalArgumentException("small node limit must be >= 0");
    }
    this.smallNodeLimitBytes = bytes;
    return this;
  }

  /**
   * How swapped tensors move (default {@link SwapPath#AUTO}: the native swap ops when their
   * library loads in this JVM, else standard ops).
   */
  public LmsBuilder swapPath(SwapPath p) {
    this.swapPath = Objects.requireNonNull(p);
    return this;
  }

  /**
   * The scheduling step run before planning, for every mode: AddN chains and the scheduler's
   * order enforced by control edges ({@link Scheduling}); default none.
   */
  public LmsBuilder scheduler(Scheduling.Scheduler s) {
    this.scheduler = Objects.requireNonNull(s);
    return this;
  }

  /** Writes the XLA-style rematerializer's per-op memory and decisions here (.json or TSV). */
  public LmsBuilder rematDump(Path file) {
    this.rematDump = file;
    return this;
  }

  /**
   * Native path only: swap-outs leave their copy to the library's copy thread so it overlaps
   * with compute (ops still run in the planned order; a swap-in waits for its copy). Default
   * off.
   */
  public LmsBuilder swapOverlap(boolean on) {
    this.swapOverlap = on;
    return this;
  }

  /** The cost model plans are compared with (default: {@link CostModel#defaults()}). */
  public LmsBuilder costModel(CostModel cm) {
    this.costModel = Objects.requireNonNull(cm);
    return this;
  }

  /** The device memory budget in bytes. */
  public LmsBuilder budget(long bytes) {
    if (bytes <= 0) {
      throw new IllegalArgumentException("budget must be positive");
    }
    this.budgetBytes = bytes;
    return this;
  }

  /** TFLMS parameters and filters (default: auto-tune everything, host tier). */
  public LmsBuilder params(SwapParams p) {
    this.params = Objects.requireNonNull(p);
    return this;
  }

  /**
   * The share of the budget the simulated peak may use (TFLMS's
   * {@code TF_LMS_SIMULATOR_MEM_RATIO}, 0.9 there; lms4j default
   * {@link Budget#DEFAULT_MEM_RATIO}; see {@link #ORDERED_MEM_RATIO}): the rest is margin for
   * fragmentation, kernel scratch memory and the memory model's misses. Set here, it is kept
   * as given: the default one gives way to {@link #ORDERED_MEM_RATIO} where no plan keeps its
   * margin.
   */
  public LmsBuilder memRatio(double r) {
    if (!(r > 0 && r <= 1)) {
      throw new IllegalArgumentException("memory ratio must be in (0, 1]");
    }
    this.memRatio = r;
    return this;
  }

  /** Whether a memory ratio was set ({@link #memRatio(double)}); else a default applies. */
  public boolean memRatioSet() {
    return !Double.isNaN(memRatio);
  }

  /** The memory ratio plans will be made at: the one set, else {@link Budget#DEFAULT_MEM_RATIO}. */
  public double memRatio() {
    return !Double.isNaN(memRatio) ? memRatio : Budget.DEFAULT_MEM_RATIO;
  }

  /** Name scope of gradient ops (default {@code gradients}). */
  public LmsBuilder backwardScope(String scope) {
    this.backwardScope = Objects.requireNonNull(scope);
    return this;
  }

  /** Directory for the disk tier's swap files. */
  public LmsBuilder swapDir(Path dir) {
    this.swapDir = dir;
    return this;
  }

  /**
   * Kernel scratch measured per op (bytes, by op name), e.g. from a traced step
   * ({@link ScratchTrace#scratchByOp()}): the graph model takes it instead of its estimates
   * ({@code DataflowGraph.withScratch}), so every planner plans with what was measured. Ops not
   * named keep their estimate.
   *
   * @param byOpName scratch bytes by op name (not null; may be empty)
   * @return this builder
   */
  public LmsBuilder scratch(Map<String, Long> byOpName) {
    this.scratch = Map.copyOf(Objects.requireNonNull(byOpName, "scratch"));
    return this;
  }

  /** A shallow copy (every field is an immutable value), for {@link Lms#withBudget}. */
  LmsBuilder copy() {
    try {
      return (LmsBuilder) super.clone();
    } catch (CloneNotSupportedException e) {
      throw new AssertionError(e);
    }
  }

  /** The configured instance. */
  public Lms build() {
    return new Lms(this);
  }
}
