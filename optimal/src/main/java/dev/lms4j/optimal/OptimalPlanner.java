package dev.lms4j.optimal;

import com.google.ortools.Loader;
import com.google.ortools.sat.BoolVar;
import com.google.ortools.sat.CpModel;
import com.google.ortools.sat.CpSolver;
import com.google.ortools.sat.CpSolverStatus;
import com.google.ortools.sat.LinearExpr;
import com.google.ortools.sat.LinearExprBuilder;
import com.google.ortools.sat.Literal;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.TensorPolicy;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.graph.Levels;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The exact reference: a Checkmate-style integer program (Jain et al., MLSys 2020) over the
 * graph's levelled schedule, extended with swapping, solved with OR-Tools CP-SAT.
 *
 * <p>Stages are the positions of the schedule (the one the simulator uses). For each transient
 * tensor {@code t} (produced at stage {@code p}, last read at stage {@code e}) and each stage
 * {@code k} in {@code (p, e]}:
 *
 * <ul>
 *   <li>{@code S[t,k]} (Checkmate's checkpoint variable): {@code t} is in device memory at stage
 *       {@code k}; forced to 1 where {@code t} is produced or read;</li>
 *   <li>{@code R[t,k]} (Checkmate's recompute variable): {@code t}'s producer runs again just
 *       before stage {@code k}; needs each transient input of the producer in memory at
 *       {@code k} ({@code R[t,k] <= S[j,k]});</li>
 *   <li>{@code W[t,k]} (the swap state): {@code t} is swapped back in before stage {@code k};
 *       needs the one swap-out {@code O[t]}; only at stages that read {@code t} or where a
 *       recomputation may read it (a swap-in earlier costs the same and holds memory longer,
 *       so it is dominated);</li>
 *   <li>{@code S[t,k] <= S[t,k-1] + R[t,k] + W[t,k]}: a tensor freed (Checkmate's free
 *       variables: {@code S} dropping to 0) comes back only by recomputation or a swap-in.</li>
 * </ul>
 *
 * Memory at each stage: resident bytes plus {@code sum_t bytes(t) S[t,k]} at most the budget
 * times the memory ratio, the simulator's accounting (a tensor is live from its producer to its
 * last reader). Objective: the {@link CostModel}'s step time: compute, plus each recomputation's
 * op time, plus each transfer's time (no overlap: the standard-op swap runs in the caller's
 * thread). Random and stateful producers are never recomputed; tensors the swap planners do not
 * swap (strings, variables, TFLMS's excluded types) are never swapped. The original ops keep
 * their order: the reference is optimal over keep/swap/recompute decisions on that schedule,
 * not over reorderings.
 *
 * <pre>{@code
 * OptimalPlanner.Result r = OptimalPlanner.solve(graph, OptimalPlanner.Options.of(budget));
 * double overhead = r.stepMs() - r.baseStepMs();
 * }</pre>
 */
public final class OptimalPlanner {
  private static final Logger LOG = LoggerFactory.getLogger(OptimalPlanner.class);

  /** CP-SAT's random seed: solves are reproducible. */
  public static final int SEED = 20_261_124;

  /** Names of the reference's swap ops start with this, then "out/" or "in/". */
  static final String SWAP_PREFIX = OpTypes.LMS_PREFIX + "swap";

  private OptimalPlanner() {}

  /**
   * Solver options.
   *
   * @param budgetBytes  device budget
   * @param memRatio     share of the budget the peak may use
   * @param costModel    times of ops and transfers
   * @param tier         swap tier (its bandwidth and latency)
   * @param swap         swapping allowed
   * @param recompute    recomputation allowed
   * @param timeLimitSec solver limit in CP-SAT's deterministic time (about seconds of one
   *                     worker's work; not wall clock, so results do not depend on load)
   * @param onceRecomputed each tensor is recomputed at most once (lms4j's recompute rewriter
   *                       clones an op once); false: as often as pays (Checkmate's model)
   */
  public record Options(long budgetBytes, double memRatio, CostModel costModel, Tier tier,
      boolean swap, boolean recompute, double timeLimitSec, boolean onceRecomputed) {
    /**
     * Swap and recompute (each tensor recomputed at most once), memory ratio 0.8, default cost
     * model, host tier, 60 s.
     */
    public static Options of(long budgetBytes) {
      return new Options(budgetBytes, 0.8, CostModel.defaults(), Tier.HOST, true, true, 60,
          true);
    }

    /** With another memory ratio. */
    public Options withMemRatio(double r) {
      return new Options(budgetBytes, r, costModel, tier, swap, recompute, timeLimitSec,
          onceRecomputed);
    }

    /** With another solver limit, in CP-SAT's deterministic time (about seconds). */
    public Options withTimeLimit(double sec) {
      return new Options(budgetBytes, memRatio, costModel, tier, swap, recompute, sec,
          onceRecomputed);
    }

    /** With another cost model. */
    public Options withCostModel(CostModel cm) {
      return new Options(budgetBytes, memRatio, cm, tier, swap, recompute, timeLimitSec,
          onceRecomputed);
    }

    /** Recomputing a tensor as often as pays (Checkmate's model, beyond lms4j's rewriters). */
    public Options anyRecomputation() {
      return new Options(budgetBytes, memRatio, costModel, tier, swap, recompute, timeLimitSec,
          false);
    }
  }

  /**
   * One transient tensor of the problem.
   *
   * @param name        TensorFlow name
   * @param bytes       size
   * @param produced    stage of its producer
   * @param last        stage of its last reader (or {@code produced})
   * @param reads       stages that read it (sorted, distinct)
   * @param swappable   may be swapped
   * @param recomputable its producer may run again
   * @param inputs      indexes of the transient tensors its producer reads
   * @param recomputeUs time of its producer, microseconds
   * @param transferUs  time of one transfer (out or in), microseconds
   * @param id          the tensor in the graph
   */
  public record Item(String name, long bytes, int produced, int last, int[] reads,
      boolean swappable, boolean recomputable, int[] inputs, double recomputeUs,
      double transferUs, TensorId id) {}

  /**
   * The problem: items over {@code stages} stages, {@code residentBytes} always in memory,
   * at most {@code availableBytes} at any stage.
   *
   * @param items          the transient tensors
   * @param stages         number of stages (ops in the schedule)
   * @param residentBytes  variables, constants, feeds
   * @param availableBytes budget times memory ratio
   * @param baseStepMs     predicted step time without LMS
   * @param onceRecomputed each tensor recomputed at most once
   * @param order          the op at each stage (the schedule the stages are positions of)
   * @param scratch        kernel scratch of the op at each stage, bytes (the simulator's
   *                       {@link DataflowGraph#scratchBytes})
   */
  public record Problem(List<Item> items, int stages, long residentBytes, long availableBytes,
      double baseStepMs, boolean onceRecomputed, int[] order, long[] scratch) {

    /** The peak without LMS (every tensor live from producer to last reader). */
    public long peakWithoutLms() {
      long[] mem = new long[stages];
      for (Item it : items) {
        for (int k = it.produced(); k <= it.last(); k++) {
          mem[k] += it.bytes();
        }
      }
      long max = 0;
      for (int k = 0; k < stages; k++) {
        max = Math.max(max, mem[k] + scratch[k]);
      }
      return residentBytes + max;
    }

    /**
     * The least memory any plan needs: resident bytes plus, at the worst stage, the tensors that
     * must be in memory there (produced or read there, or neither swappable nor recomputable)
     * and the stage's scratch. No plan of this model fits below it.
     */
    public long floorBytes() {
      long[] mem = new long[stages];
      for (Item it : items) {
        boolean movable = it.swappable() || it.recomputable();
        mem[it.produced()] += it.bytes();
        if (!movable) {
          for (int k = it.produced() + 1; k <= it.last(); k++) {
            mem[k] += it.bytes();
          }
        } else {
          for (int k : it.reads()) {
            if (k != it.produced()) {
              mem[k] += it.bytes();
            }
          }
        }
      }
      long max = 0;
      for (int k = 0; k < stages; k++) {
        max = Math.max(max, mem[k] + scratch[k]);
      }
      return residentBytes + max;
    }
  }

  /**
   * The solution.
   *
   * @param status     CP-SAT's status (OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN, ...)
   * @param feasible   a plan under the budget was found
   * @param optimal    it is proven optimal
   * @param stepMs     its predicted step time (NaN when none was found)
   * @param baseStepMs predicted step time without LMS
   * @param boundMs    the solver's lower bound on the step time
   * @param swapped    tensors swapped out
   * @param recomputed recomputations
   * @param solveMs    wall time of the solve
   * @param decisions  what the solution does, one line per tensor ("f3:0 swap-in at 41", ...)
   * @param moves      the same, as values: each swap-in and recomputation with its stage
   */
  public record Result(String status, boolean feasible, boolean optimal, double stepMs,
      double baseStepMs, double boundMs, int swapped, int recomputed, long solveMs,
      List<String> decisions, List<Move> moves) {

    /** Predicted time added to a step, milliseconds. */
    public double overheadMs() {
      return stepMs - baseStepMs;
    }
  }

  /**
   * One decision of a solution: item {@code item} comes back to memory just before stage
   * {@code stage}, by running its producer again ({@code recompute}) or by a swap-in (then the
   * item is swapped out once, after its producer).
   *
   * @param item      index into {@link Problem#items()}
   * @param stage     the stage it is back for
   * @param recompute recomputed (true) or swapped in (false)
   */
  public record Move(int item, int stage, boolean recompute) {}

  /** Builds the problem of {@code g} (levelled schedule, simulator accounting). */
  public static Problem problem(DataflowGraph g, Options o) {
    return problem(g, o, TensorPolicy.builtin(g));
  }

  /**
   * Builds the problem of {@code g}; what may be swapped or recomputed comes from {@code policy},
   * as for every planner.
   */
  public static Problem problem(DataflowGraph g, Options o, TensorPolicy policy) {
    int[] order = Levels.of(g).schedule();
    int[] pos = new int[g.size()];
    for (int i = 0; i < order.length; i++) {
      pos[order[i]] = i;
    }
    CostModel cm = o.costModel();
    boolean[] foldable = g.constantFoldable();
    long resident = 0;
    Map<TensorId, Integer> index = new HashMap<>();
    List<TensorId> ids = new ArrayList<>();
    for (Op op : g.ops()) {
      if (MemorySimulator.isPinned(op)) {
        resident += MemorySimulator.residentBytes(g, op);
        continue;
      }
      for (int i = 0; i < op.outputs().size(); i++) {
        Tensor t = op.output(i);
        if (!t.persistent() && t.bytes() > 0) {
          TensorId tid = new TensorId(op.id(), i);
          index.put(tid, ids.size());
          ids.add(tid);
        }
      }
    }
    List<Item> items = new ArrayList<>();
    for (TensorId tid : ids) {
      Op prod = g.op(tid.op());
      Tensor t = prod.output(tid.output());
      TreeSet<Integer> reads = new TreeSet<>();
      for (int c : g.consumers(tid)) {
        if (!OpTypes.SHAPE_ONLY.contains(g.op(c).type())) {
          reads.add(pos[c]);
        }
      }
      int p = pos[tid.op()];
      int last = reads.isEmpty() ? p : Math.max(p, reads.last());
      TreeSet<Integer> inputs = new TreeSet<>();
      for (TensorId in : prod.inputs()) {
        Integer j = index.get(in);
        if (j != null) {
          inputs.add(j);
        }
      }
      boolean swappable = o.swap() && !foldable[prod.id()] && policy.maySwap(g, tid);
      boolean recomputable = o.recompute() && !foldable[prod.id()] && policy.mayRecompute(prod);
      items.add(new Item(g.tensorName(tid), t.bytes(), p, last,
          reads.stream().mapToInt(Integer::intValue).toArray(), swappable, recomputable,
          inputs.stream().mapToInt(Integer::intValue).toArray(), cm.opUs(g, prod),
          cm.transferUs(t.bytes(), o.tier()), tid));
    }
    long[] scratch = new long[order.length];
    for (int k = 0; k < order.length; k++) {
      scratch[k] = g.scratchBytes(order[k]);
    }
    return new Problem(items, g.size(), resident, (long) (o.budgetBytes() * o.memRatio()),
        cm.computeMs(g), o.onceRecomputed(), order, scratch);
  }

  /** Solves for {@code g}. */
  public static Result solve(DataflowGraph g, Options o) {
    return solve(problem(g, o), o.timeLimitSec());
  }

  /**
   * Solves a problem with CP-SAT: one worker, seed {@link #SEED}, at most {@code timeLimitSec}
   * of deterministic time.
   */
  public static Result solve(Problem pr, double timeLimitSec) {
    Loader.loadNativeLibraries();
    long t0 = System.nanoTime();
    CpModel m = new CpModel();
    List<Item> items = pr.items();
    int n = items.size();
    // S[i][k - produced] for k in [produced, last]; null where forced to 1
    Literal[][] s = new Literal[n][];
    BoolVar[][] r = new BoolVar[n][];
    BoolVar[][] w = new BoolVar[n][];
    BoolVar[] out = new BoolVar[n];
    Literal one = m.trueLiteral();
    LinearExprBuilder cost = LinearExpr.newBuilder();
    boolean[][] feedsRecompute = new boolean[n][];
    for (int i = 0; i < n; i++) {
      Item it = items.get(i);
      feedsRecompute[i] = new boolean[it.last() - it.produced() + 1];
    }
    for (Item it : items) {
      if (!it.recomputable()) {
        continue;
      }
      for (int j : it.inputs()) {
        Item in = items.get(j);
        for (int k = Math.max(it.produced() + 1, in.produced()); k <= Math.min(it.last(),
            in.last()); k++) {
          feedsRecompute[j][k - in.produced()] = true;
        }
      }
    }
    for (int i = 0; i < n; i++) {
      Item it = items.get(i);
      int len = it.last() - it.produced() + 1;
      s[i] = new Literal[len];
      r[i] = new BoolVar[len];
      w[i] = new BoolVar[len];
      boolean movable = it.swappable() || it.recomputable();
      boolean[] read = new boolean[len];
      read[0] = true;
      for (int k : it.reads()) {
        read[k - it.produced()] = true;
      }
      for (int d = 0; d < len; d++) {
        s[i][d] = read[d] || !movable ? one : m.newBoolVar("S_" + i + "_" + d);
      }
      if (!movable) {
        continue;
      }
      if (it.swappable()) {
        out[i] = m.newBoolVar("O_" + i);
        cost.addTerm(out[i], Math.round(it.transferUs() * 1000));
      }
      for (int d = 1; d < len; d++) {
        LinearExprBuilder come = LinearExpr.newBuilder().add(s[i][d - 1]);
        if (it.recomputable()) {
          r[i][d] = m.newBoolVar("R_" + i + "_" + d);
          come.add(r[i][d]);
          cost.addTerm(r[i][d], Math.round(it.recomputeUs() * 1000));
        }
        // a swap-in is placed at a stage that reads the tensor or where a recomputation may
        // read it: one earlier costs the same and holds memory longer (dominated)
        if (it.swappable() && (read[d] || feedsRecompute[i][d])) {
          w[i][d] = m.newBoolVar("W_" + i + "_" + d);
          come.add(w[i][d]);
          m.addImplication(w[i][d], out[i]);
          cost.addTerm(w[i][d], Math.round(it.transferUs() * 1000));
        }
        m.addLessOrEqual(LinearExpr.newBuilder().add(s[i][d]), come);
      }
      if (pr.onceRecomputed() && it.recomputable()) {
        LinearExprBuilder once = LinearExpr.newBuilder();
        for (BoolVar v : r[i]) {
          if (v != null) {
            once.add(v);
          }
        }
        m.addLessOrEqual(once, 1);
      }
    }
    // recomputation needs the producer's inputs in memory at that stage
    for (int i = 0; i < n; i++) {
      Item it = items.get(i);
      if (r[i] == null) {
        continue;
      }
      for (int d = 1; d < r[i].length; d++) {
        if (r[i][d] == null) {
          continue;
        }
        int k = it.produced() + d;
        for (int j : it.inputs()) {
          Item in = items.get(j);
          if (k < in.produced() || k > in.last()) {
            m.addEquality(r[i][d], 0);
          } else {
            m.addImplication(r[i][d], s[j][k - in.produced()]);
          }
        }
      }
    }
    // memory at each stage
    long avail = pr.availableBytes() - pr.residentBytes();
    List<List<int[]>> live = new ArrayList<>();
    for (int k = 0; k < pr.stages(); k++) {
      live.add(new ArrayList<>());
    }
    for (int i = 0; i < n; i++) {
      Item it = items.get(i);
      for (int k = it.produced(); k <= it.last(); k++) {
        live.get(k).add(new int[] {i, k - it.produced()});
      }
    }
    for (int k = 0; k < pr.stages(); k++) {
      LinearExprBuilder mem = LinearExpr.newBuilder();
      long fixed = 0;
      for (int[] e : live.get(k)) {
        Literal l = s[e[0]][e[1]];
        if (l == one) {
          fixed += items.get(e[0]).bytes();
        } else {
          mem.addTerm(l, items.get(e[0]).bytes());
        }
      }
      long room = avail - fixed - pr.scratch()[k];
      if (room < 0) {
        return new Result("INFEASIBLE", false, false, Double.NaN, pr.baseStepMs(), Double.NaN,
            0, 0, (System.nanoTime() - t0) / 1_000_000, List.of(), List.of());
      }
      m.addLessOrEqual(mem, room);
    }
    m.minimize(cost);
    CpSolver solver = new CpSolver();
    // reproducible: one worker, a fixed seed and a deterministic-time limit (CP-SAT's measure
    // of work done, about seconds on a fast core) instead of wall clock, so the same problem
    // ends in the same status and solution however loaded the machine is
    solver.getParameters().setNumWorkers(1);
    solver.getParameters().setRandomSeed(SEED);
    solver.getParameters().setMaxDeterministicTime(timeLimitSec);
    CpSolverStatus st = solver.solve(m);
    long ms = (System.nanoTime() - t0) / 1_000_000;
    boolean feasible = st == CpSolverStatus.OPTIMAL || st == CpSolverStatus.FEASIBLE;
    if (!feasible) {
      return new Result(st.name(), false, false, Double.NaN, pr.baseStepMs(), Double.NaN, 0, 0,
          ms, List.of(), List.of());
    }
    int swapped = 0;
    int recomputed = 0;
    List<String> decisions = new ArrayList<>();
    List<Move> moves = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      StringBuilder d = new StringBuilder();
      for (int k = 1; k < s[i].length; k++) {
        int stage = items.get(i).produced() + k;
        if (r[i][k] != null && solver.booleanValue(r[i][k])) {
          d.append(" recompute at ").append(stage);
          moves.add(new Move(i, stage, true));
        }
        if (w[i][k] != null && solver.booleanValue(w[i][k])) {
          d.append(" swap-in at ").append(stage);
          moves.add(new Move(i, stage, false));
        }
      }
      if (d.length() > 0) {
        decisions.add(items.get(i).name() + " [" + items.get(i).produced() + ".."
            + items.get(i).last() + "]" + d);
      }
      if (out[i] != null && solver.booleanValue(out[i])) {
        swapped++;
      }
      if (r[i] != null) {
        for (BoolVar v : r[i]) {
          if (v != null && solver.booleanValue(v)) {
            recomputed++;
          }
        }
      }
    }
    double step = pr.baseStepMs() + solver.objectiveValue() / 1e6;
    double bound = pr.baseStepMs() + solver.bestObjectiveBound() / 1e6;
    LOG.info("Optimal reference: {} items, {} stages, status {}, step {} ms (base {} ms, bound "
        + "{} ms), {} swapped, {} recomputations, {} ms", n, pr.stages(), st,
        String.format("%.3f", step), String.format("%.3f", pr.baseStepMs()),
        String.format("%.3f", bound), swapped, recomputed, ms);
    return new Result(st.name(), true, st == CpSolverStatus.OPTIMAL, step, pr.baseStepMs(),
        bound, swapped, recomputed, ms, decisions, moves);
  }
}
