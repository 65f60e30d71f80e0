package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.ServiceLoader;
import java.util.function.Supplier;
import java.util.stream.Collectors;

/**
 * The one list of LMS modes: each entry owns its command-line name, a description, whether it
 * needs a budget, and the factory of its {@link Planner}. The CLI, the {@code Lms} facade, the
 * trainer's callback, the benchmark and the reports all use it. Adding a planner is one class and
 * one entry here.
 *
 * <pre>{@code
 * MemoryPlan p = LmsMode.parse("auto").plan(graph, ctx);
 * }</pre>
 */
public enum LmsMode {
  /** No rewrite. */
  OFF("off", "no LMS: the graph runs as it is", false, true, null),
  /** TFLMS's swap planner, auto-tuned unless its parameters are given. */
  TFLMS("tflms", "TFLMS's swap planner (levels; auto-tuned unless parameters are given)", false,
      true, TflmsPlanner::new),
  /** The cost-based planner restricted to swapping. */
  SWAP("swap", "the cost-based planner restricted to swapping (per-tensor swaps, swap-in "
      + "triggers chosen by the cost model); TFLMS's swap planner where that finds no plan",
      true, true, LmsMode::swapPlanner),
  /** Grappler-style recomputation of cheap groups. */
  REMAT("remat", "recompute cheap forward ops in the backward pass (grappler-style groups "
      + "chosen to fit the budget)", false, true, GroupsRecomputePlanner::new),
  /** XLA's standard rematerialization. */
  REMAT_XLA("remat-xla", "XLA's standard rematerialization (best bytes saved per recompute "
      + "cost at the peak, in growing blocks)", true, true,
      () -> new XlaRematPlanner(Rematerializer.Mode.STANDARD)),
  /** XLA-style path rematerialization. */
  REMAT_PATH("remat-path", "path rematerialization (whole paths, then articulation ops kept "
      + "while within the budget)", true, true,
      () -> new XlaRematPlanner(Rematerializer.Mode.PATH)),
  /** The best-of: hybrid and baseline, the one predicted fastest. */
  AUTO("auto", "the cost-based hybrid planner (per tensor keep, swap or recompute, lowest "
      + "predicted step time), or the recompute+TFLMS baseline when that is predicted faster",
      true, true, LmsMode::autoPlanner),
  /** Chen et al.'s sqrt(n) checkpointing, a baseline. */
  SQRT("sqrt", "Chen et al.'s sqrt(n) checkpointing (a baseline; ignores the budget)", false,
      true, SqrtPlanner::new),
  /** The cost-based planner with swapping and recomputation (a candidate of auto). */
  HYBRID("hybrid", "the cost-based planner, swap and recompute", true, false,
      () -> new HybridCostPlanner(true)),
  /** Recompute groups, then TFLMS on the rest (a candidate of auto). */
  BASELINE("baseline", "grappler-style recompute groups, then TFLMS swapping on the rest", true,
      false, BaselinePlanner::new),
  /**
   * The exact reference (CP-SAT over keep, swap and recompute on the levelled schedule), from
   * the {@code lms4j-optimal} module through {@link ServiceLoader}; for benchmarks and tests.
   */
  OPTIMAL("optimal", "the exact reference: CP-SAT over keep, swap and recompute per tensor on "
      + "the levelled schedule (needs lms4j-optimal on the class path)", true, false,
      LmsMode::optimalPlanner);

  private final String cliName;
  private final String description;
  private final boolean needsBudget;
  private final boolean userFacing;
  private final Supplier<Planner> factory;

  LmsMode(String cliName, String description, boolean needsBudget, boolean userFacing,
      Supplier<Planner> factory) {
    this.cliName = cliName;
    this.description = description;
    this.needsBudget = needsBudget;
    this.userFacing = userFacing;
    this.factory = factory;
  }

  private static Planner swapPlanner() {
    return new AutoPlanner("swap", List.of(new HybridCostPlanner(false)),
        List.of(new TflmsPlanner()));
  }

  private static Planner optimalPlanner() {
    for (Planner p : ServiceLoader.load(Planner.class, LmsMode.class.getClassLoader())) {
      if (p.name().equals("optimal")) {
        return p;
      }
    }
    throw new IllegalStateException("the optimal reference needs lms4j-optimal (OR-Tools) on "
        + "the class path");
  }

  private static Planner autoPlanner() {
    return new AutoPlanner("auto", List.of(HYBRID.planner(), BASELINE.planner()),
        List.of(new HybridCostPlanner(false), TFLMS.planner(), REMAT.planner()));
  }

  /** The name on the command line and in reports. */
  public String cliName() {
    return cliName;
  }

  /** One sentence for help texts. */
  public String description() {
    return description;
  }

  /** True when the mode cannot plan without a budget. */
  public boolean needsBudget() {
    return needsBudget;
  }

  /** True for the modes {@code --lms} offers (the others are candidates of {@code auto}). */
  public boolean userFacing() {
    return userFacing;
  }

  /** True when the mode rewrites the graph. */
  public boolean plans() {
    return factory != null;
  }

  /** A new planner of this mode. */
  public Planner planner() {
    if (factory == null) {
      throw new IllegalStateException("mode " + cliName + " has no planner");
    }
    return factory.get();
  }

  /**
   * Plans {@code g} in this mode: the tensor policy's forced decisions (ops to recompute, inputs
   * to swap) first, then this mode's planner on the rest. {@link #REMAT} with ops to recompute
   * plans only those (the budget does not change a manual choice); {@link #OFF} plans nothing.
   *
   * @throws PlanningException when no plan fits the budget
   */
  public MemoryPlan plan(DataflowGraph g, PlanningContext ctx) {
    if (needsBudget && !ctx.budget().isSet()) {
      throw new IllegalArgumentException("the " + cliName + " mode needs a budget");
    }
    if (this == OFF) {
      return MemoryPlan.unchanged(cliName, g, ctx, RecomputePlanner.peak(g, RecomputePlan.empty()));
    }
    boolean manualOnly = this == REMAT && !ctx.policy().mustRecompute().isEmpty();
    return ForcedDecisions.plan(manualOnly ? null : planner(), g, ctx);
  }

  /**
   * This mode as it plans with {@code params}: {@code auto} and {@code swap} with TFLMS
   * parameters set by hand (none left at -1) use the TFLMS planner, as TFLMS did.
   */
  public LmsMode with(SwapParams params) {
    return (this == AUTO || this == SWAP) && !params.autoTune() ? TFLMS : this;
  }

  /**
   * The mode with this command-line name (case-insensitive); {@code none} is taken for
   * {@code off}, as the benchmark's tables name the unmodified graph.
   *
   * @throws IllegalArgumentException naming the valid modes
   */
  public static LmsMode parse(String s) {
    String k = s.trim().toLowerCase(Locale.ROOT);
    if (k.equals("none")) {
      return OFF;
    }
    for (LmsMode m : values()) {
      if (m.userFacing && m.cliName.equals(k)) {
        return m;
      }
    }
    throw new IllegalArgumentException("unknown LMS mode '" + s + "' (expected " + cliNames()
        + ")");
  }

  /** The user-facing names, comma-separated, for messages and help. */
  public static String cliNames() {
    return Arrays.stream(values()).filter(m -> m.userFacing).map(LmsMode::cliName)
        .collect(Collectors.joining(", "));
  }
}
