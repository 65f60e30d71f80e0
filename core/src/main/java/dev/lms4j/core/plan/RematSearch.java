package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.plan.Rematerializer.Decision;
import dev.lms4j.core.plan.Rematerializer.Mode;
import dev.lms4j.core.plan.Rematerializer.Result;
import dev.lms4j.core.schedule.Scheduling;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;

/**
 * One {@link Rematerializer} search over one graph: the ops that may be recomputed (from the
 * {@link TensorPolicy}, the {@link Fusions} guards and the small-node limit), the set chosen so
 * far, the decision log and the simulator count, shared by the two modes
 * ({@link RematStandard}, {@link RematPath}).
 */
final class RematSearch {
  final DataflowGraph g;
  final long limit;
  final Rematerializer.Options o;
  final int n;
  /** Ops that may be recomputed. */
  final boolean[] eligible;
  /** Predicted recompute time of the eligible ops, microseconds (0 for the others). */
  final double[] costUs;
  /** The ops chosen for recomputation. */
  final boolean[] inS;
  final List<Decision> decisions = new ArrayList<>();
  /** Simulator runs so far. */
  int sims;

  /**
   * @param mayRecompute which ops may be recomputed: the tensor policy's
   *                     {@link TensorPolicy#mayRecompute} (a predicate so tests can narrow it)
   */
  RematSearch(DataflowGraph g, long limit, Rematerializer.Options o,
      Predicate<Op> mayRecompute) {
    this.g = g;
    this.limit = limit;
    this.o = o;
    this.n = g.size();
    eligible = new boolean[n];
    costUs = new double[n];
    inS = new boolean[n];
    for (Op op : g.ops()) {
      eligible[op.id()] = mayRecompute.test(op) && !Fusions.unsafeToRecompute(g, op)
          && op.transientOutputBytes() >= Math.max(1, o.smallNodeLimitBytes());
      costUs[op.id()] = eligible[op.id()] ? o.costModel().opUs(g, op) : 0;
    }
  }

  /** Evaluates the current set. */
  RematEval eval() {
    return new RematEval(this);
  }

  /** True while the simulation bound is not reached. */
  boolean canSimulate() {
    return sims < o.maxSimulations();
  }

  Result run(Scheduling.Result s) {
    RematEval base = eval();
    RematEval cur = base;
    if (base.peak() > limit) {
      cur = o.mode() == Mode.STANDARD ? new RematStandard(this).run(base)
          : new RematPath(this).run(base);
    }
    if (o.mode() == Mode.PATH && cur.peak() > limit && canSimulate()) {
      // the paths, their kept checkpoints and the greedy from there missed the limit (where
      // the undo step stops depends on recompute costs): the greedy from no recomputation
      boolean[] fromPaths = inS.clone();
      Arrays.fill(inS, false);
      note("restart-standard", List.of(), base.peak());
      RematEval alt = new RematStandard(this).run(base);
      if (alt.betterThan(cur)) {
        cur = alt;
      } else {
        System.arraycopy(fromPaths, 0, inS, 0, n);
      }
    }
    return new Result(cur.plan, g, s, limit, base.peak(), cur.peak(), sims, decisions, o);
  }

  /** Logs a decision on {@code ops} (their recompute time summed). */
  void decide(String action, List<Integer> ops, long est, long peak) {
    double c = 0;
    List<String> names = new ArrayList<>();
    for (int v : ops) {
      c += costUs[v];
      names.add(g.op(v).name());
    }
    decisions.add(new Decision(decisions.size(), action, names, est, c, peak));
  }

  /** Logs a step that concerns no op. */
  void note(String action, List<String> what, long peak) {
    decisions.add(new Decision(decisions.size(), action, what, 0, 0, peak));
  }
}
