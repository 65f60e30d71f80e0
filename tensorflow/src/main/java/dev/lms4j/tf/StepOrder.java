package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.ExecutorOrder;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.plan.MemoryPlan;
import java.util.Map;
import java.util.Set;
import org.tensorflow.proto.GraphDef;

/**
 * The order the allocator model replays a step of a rewritten graph in: the order TensorFlow
 * runs it in. With lms4j's serial order ({@link SerialOrder}) that is the levelled schedule's
 * chain, with the ops left out of it ({@link UnchainedOps}, the product trees grappler groups
 * that are not written) run as TensorFlow's executor runs them: as soon as they are ready, ahead
 * of the chain's next op ({@link ExecutorOrder}). Without it, the levelled schedule itself.
 *
 * <pre>{@code
 * StepOrder o = StepOrder.serial(gd, feedShapes, runOps);
 * for (int[] order : o.orders(r)) {
 *   BfcReplay.replay(r, order, budget);
 * }
 * }</pre>
 *
 * <p>The ops are named: a plan's own ops (swaps, recomputations) are in the chain, as
 * {@link SerialOrder} chains them.
 */
public final class StepOrder {
  /** The identities the model pruner removes where no control edge holds them. */
  private static final Set<String> IDENTITIES = Set.of("Identity", "IdentityN", "Snapshot",
      "StopGradient", "PreventGradient");
  private static final StepOrder LEVELLED = new StepOrder(Set.of(), Set.of(), Set.of(), null);
  private final Set<String> unchained;
  private final Set<String> atOnce;
  private final Set<String> pinned;
  /** The order of the graph a plan is committed to (null: this order for every plan). */
  private final java.util.function.Function<MemoryPlan, StepOrder> perPlan;

  private StepOrder(Set<String> unchained, Set<String> atOnce, Set<String> pinned,
      java.util.function.Function<MemoryPlan, StepOrder> perPlan) {
    this.unchained = unchained;
    this.atOnce = atOnce;
    this.pinned = pinned;
    this.perPlan = perPlan;
  }

  /**
   * The order of a graph whose chain leaves {@code unchained} out ({@link SerialOrder}, on the
   * graph as written).
   */
  static StepOrder of(GraphDef gd, Set<String> unchained) {
    Set<String> pinned = new java.util.HashSet<>(UnchainedOps.merges(gd).values());
    pinned.retainAll(unchained);
    return new StepOrder(unchained, UnchainedOps.atOnce(gd, unchained), pinned, null);
  }

  /** The levelled schedule ({@link Levels#schedule()}): a graph run without the serial order. */
  public static StepOrder levelled() {
    return LEVELLED;
  }

  /**
   * The order of {@code gd} (or of a rewrite of it) run in lms4j's serial order.
   *
   * @param gd         the graph (before or after the chain: control edges do not change which
   *                   ops are left out)
   * @param feedShapes its feeds' shapes
   * @param runOps     what a step runs (empty: the levelled schedule, as {@link SerialOrder}
   *                   chains nothing it cannot name)
   */
  public static StepOrder serial(GraphDef gd, Map<String, long[]> feedShapes,
      Set<String> runOps) {
    if (runOps.isEmpty()) {
      return LEVELLED;
    }
    return of(gd, SerialOrder.unchained(gd, feedShapes, runOps));
  }

  /**
   * The order TensorFlow usually runs a step of {@code gd} in when nothing chains it (the graph
   * as given): modelled by the serial order's ({@link #serial(GraphDef, Map, Set)}), the levelled
   * chain with the ops it leaves out run as the executor runs them, as soon as they are ready
   * and the filter gradients ahead of the chain's next op. The allocator model replayed in the
   * order a traced step ran (19 graphs: 16 corpus families at bench size, resnet b32, lenet b100,
   * gpt2 b4; two traces each, the same need in both) needs what it needs in this order on 15 of
   * them and what it needs in the levelled schedule on 12. The corpus U-Net: traced 62 MiB, this
   * order 62, the levelled schedule 94 (a 2 MiB input gradient allocated first grows a region
   * that a 31.5 MiB filter gradient's col buffer then cannot have whole; traced, TensorFlow ran
   * {@code Conv2DBackpropFilter_2} right before {@code Conv2DBackpropInput_2}).
   *
   * <p>Usually, not always: of 36 budgeted workers running the U-Net as given at 62 MiB, 33
   * trained and 3 ran out of memory in that col buffer, the levelled schedule's failure. So the
   * fidelity bench predicts with this order the smallest budget it bisects, while lms4j's own
   * decisions about a graph as given (the allocator check's fallback, the refusal's figure) keep
   * the levelled schedule, the larger need of the two on all 19 graphs. Without the ops a step
   * runs, the levelled schedule.
   */
  public static StepOrder given(GraphDef gd, Map<String, long[]> feedShapes, Set<String> runOps) {
    return serial(gd, feedShapes, runOps);
  }

  /**
   * As {@link #serial(GraphDef, Map, Set)} for {@code gd}, and for each plan made for it the
   * order of the graph {@code commit} makes of the two ({@link #forPlan}). A plan's ops change
   * what the chain leaves out: a swap-out or a recomputation that reads a contraction gives it a
   * second reader, so grappler no longer fuses it with its bias add, and the chain takes both
   * in. Measured on the corpus mlp-mixed (auto's plan for 111 MiB, swapping two float16
   * products out): replayed with the graph's own order, the plan needed 102 MiB of the
   * allocator model, with its committed graph's 110, which is what it really needs.
   *
   * @param commit the graph a plan makes of {@code gd} (as {@code PlanCommit} writes it)
   */
  public static StepOrder serial(GraphDef gd, Map<String, long[]> feedShapes, Set<String> runOps,
      java.util.function.Function<MemoryPlan, GraphDef> commit) {
    StepOrder base = serial(gd, feedShapes, runOps);
    if (base == LEVELLED) {
      return base;
    }
    Map<MemoryPlan, StepOrder> seen = java.util.Collections.synchronizedMap(
        new java.util.IdentityHashMap<>());
    return new StepOrder(base.unchained, base.atOnce, base.pinned, plan -> !plan.needed() ? base
        : seen.computeIfAbsent(plan, p -> serial(commit.apply(p), feedShapes, runOps)));
  }

  /**
   * The order of the graph {@code plan} is committed to: for an order made with a commit
   * ({@link #serial(GraphDef, Map, Set, java.util.function.Function)}), that graph's serial
   * order; else this order.
   *
   * @param plan a plan for the graph this order was made for (null: the graph itself)
   */
  public StepOrder forPlan(MemoryPlan plan) {
    return perPlan == null || plan == null ? this : perPlan.apply(plan);
  }

  /** The ops left out of the chain (empty for the levelled schedule). */
  public Set<String> unchained() {
    return unchained;
  }

  /**
   * The ops left out of the chain that the chain's op after them waits for (a control edge
   * {@link SerialOrder} adds): the filter gradients oneDNN merges with their bias gradients,
   * which take one without losing the merge.
   */
  public Set<String> pinned() {
    return pinned;
  }

  /**
   * The orders a step of {@code g} may run in: where the chain's next op and an op left out of
   * the chain become ready together, TensorFlow runs either first, and which one varies from
   * one process to the next ({@link ExecutorOrder#of(DataflowGraph, int[], boolean[], boolean[],
   * boolean)}). The first order runs the unchained op first; a second, where it differs, the
   * chain's op.
   *
   * @param g the graph's model (or a plan applied to it)
   * @return one or two orders, each of every op of {@code g}
   */
  public java.util.List<int[]> orders(DataflowGraph g) {
    return orders(g, Levels.of(g).schedule());
  }

  /** As {@link #orders(DataflowGraph)}, with the chain in {@code chain}'s order. */
  java.util.List<int[]> orders(DataflowGraph g, int[] chain) {
    if (unchained.isEmpty()) {
      return java.util.List.of(chain);
    }
    boolean[] u = new boolean[g.size()];
    boolean[] a = new boolean[g.size()];
    boolean[] p = new boolean[g.size()];
    for (var op : g.ops()) {
      u[op.id()] = unchained.contains(op.name());
      // the model pruner keeps an identity with a control edge in or out (a plan's swap can
      // be triggered by one): it runs as a kernel of its own
      a[op.id()] = atOnce.contains(op.name()) && (!IDENTITIES.contains(op.type())
          || op.controlInputs().isEmpty() && g.controlSuccessors(op.id()).length == 0);
      p[op.id()] = pinned.contains(op.name());
    }
    int[] first = ExecutorOrder.of(g, chain, u, a, p, false);
    int[] second = ExecutorOrder.of(g, chain, u, a, p, true);
    return java.util.Arrays.equals(first, second) ? java.util.List.of(first)
        : java.util.List.of(first, second);
  }

  /**
   * Of {@link #orders}, the one the allocator model needs the most for (its smallest budget
   * with the variables in the graph's order, up to {@code maxMib}).
   */
  public int[] worst(DataflowGraph g, long maxMib) {
    java.util.List<int[]> os = orders(g);
    int[] worst = os.get(0);
    if (os.size() > 1) {
      long a = dev.lms4j.core.memory.BfcReplay.smallestMib(g, os.get(0), maxMib);
      long b = dev.lms4j.core.memory.BfcReplay.smallestMib(g, os.get(1), maxMib);
      if (a >= 0 && (b < 0 || b > a)) {
        worst = os.get(1);
      }
    }
    return worst;
  }
}
