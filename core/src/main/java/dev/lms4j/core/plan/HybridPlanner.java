package dev.lms4j.core.plan;

import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.LowerBound;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.graph.Levels;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The cost-based planner: for each forward tensor the backward pass reads, keep it, swap it
 * (swap-out after its producer, one swap-in triggered by a backward op chosen so that, when
 * transfers overlap compute, the transfer hides behind the compute before its first backward
 * reader) or recompute its producer in the backward pass, minimising the step time the
 * {@link CostModel} predicts while the simulated peak stays under the budget. In the spirit of
 * Capuchin (Peng et al. 2020: swap what hides behind compute, recompute what costs less than an
 * unhidden transfer) and SwapAdvisor (Huang et al. 2020: decide per tensor against a simulator).
 *
 * <p>The loop: simulate the current plan (both rewrites applied to the graph model, the levelled
 * schedule, {@link MemorySimulator}); among the undecided candidates alive at the peak, take the
 * cheapest per byte (predicted added milliseconds per byte freed) until their bytes cover the
 * excess over the budget; simulate again; keep the batch when the peak went down, else retry its
 * first candidate alone and, when that does not help either, move that candidate to its next
 * option (or drop it). Recomputed producers that read each other become one group (clones read
 * clones); a clone that reads a swapped tensor reads its swap-in, which then waits for the
 * earlier of its own trigger and the clone's. When the
 * plan fits, the most expensive decisions are undone while it still fits. The returned peak is
 * the simulator's on the rewritten model, never the planner's own bookkeeping.
 *
 * <pre>{@code
 * HybridPlanner.Result r = HybridPlanner.plan(graph,
 *     HybridPlanner.Options.of(512L << 20).withCostModel(CostModel.defaults()));
 * GraphDef out = SwapRewriter.rewrite(RecomputeRewriter.rewrite(gd, r.recompute()), r.swaps(), ...);
 * }</pre>
 */
public final class HybridPlanner {
  private static final Logger LOG = LoggerFactory.getLogger(HybridPlanner.class);

  /** Dtypes never swapped: they are not plain buffers. */
  private static final Set<String> NOT_SWAPPABLE = Set.of("string", "resource", "variant");

  /** Graphs up to this many ops get exhaustive upgrade and prune passes. */
  private static final int SMALL = 2000;
  /** Ancestors of a backward reader searched for a swap-in trigger. */
  private static final int TRIGGER_SEARCH = 256;

  /**
   * What the planner may do and against what.
   *
   * @param budgetBytes    the device budget
   * @param memRatio       share of the budget the simulated peak may use
   * @param costModel      predicts op and transfer times
   * @param tier           where swapped tensors go
   * @param swap           swapping allowed
   * @param recompute      recomputation allowed
   * @param pruneLimit     at most this many decisions are tried for undoing once the plan fits
   * @param maxSimulations the loop stops after this many simulations
   */
  public record Options(long budgetBytes, double memRatio, CostModel costModel, Tier tier,
      boolean swap, boolean recompute, int pruneLimit, int maxSimulations) {
    public Options {
      Objects.requireNonNull(costModel);
      Objects.requireNonNull(tier);
      if (budgetBytes <= 0 || !(memRatio > 0 && memRatio <= 1)) {
        throw new IllegalArgumentException("budget must be positive, memory ratio in (0, 1]");
      }
      if (!swap && !recompute) {
        throw new IllegalArgumentException("allow swapping, recomputation or both");
      }
    }

    /** Swap and recompute, host tier, default cost model, memory ratio 0.8. */
    public static Options of(long budgetBytes) {
      return new Options(budgetBytes, SwapAutoTuner.DEFAULT_MEM_RATIO, CostModel.defaults(),
          Tier.HOST, true, true, 12, 400);
    }

    /** With another memory ratio. */
    public Options withMemRatio(double r) {
      return new Options(budgetBytes, r, costModel, tier, swap, recompute, pruneLimit,
          maxSimulations);
    }

    /** With another cost model. */
    public Options withCostModel(CostModel cm) {
      return new Options(budgetBytes, memRatio, cm, tier, swap, recompute, pruneLimit,
          maxSimulations);
    }

    /** With another tier. */
    public Options withTier(Tier t) {
      return new Options(budgetBytes, memRatio, costModel, t, swap, recompute, pruneLimit,
          maxSimulations);
    }

    /** Swapping only (no recomputation). */
    public Options swapOnly() {
      return new Options(budgetBytes, memRatio, costModel, tier, true, false, pruneLimit,
          maxSimulations);
    }

    /** Recomputation only (no swapping). */
    public Options recomputeOnly() {
      return new Options(budgetBytes, memRatio, costModel, tier, false, true, pruneLimit,
          maxSimulations);
    }
  }

  /**
   * The plan.
   *
   * @param swaps           what to swap; names refer to the graph with {@code recompute}
   *                        applied (apply the recompute plan first)
   * @param recompute       what to recompute
   * @param needed          false when the graph fits as it is (both plans empty)
   * @param peakBefore      simulated peak of the graph as it is
   * @param predictedPeak   simulated peak with both plans applied
   * @param baseStepMs      predicted step time without LMS
   * @param predictedStepMs predicted step time with both plans
   * @param simulations     simulator runs
   */
  public record Result(SwapPlan swaps, RecomputePlan recompute, boolean needed, long peakBefore,
      long predictedPeak, double baseStepMs, double predictedStepMs, int simulations) {

    /** Predicted time LMS adds to a step, milliseconds. */
    public double overheadMs() {
      return predictedStepMs - baseStepMs;
    }
  }

  private enum Kind { SWAP, RECOMPUTE }

  /** One way to free a candidate tensor, with its predicted added time in microseconds. */
  private record Option(Kind kind, double costUs, List<String> triggers) {}

  private static final class Candidate {
    final TensorId tid;
    final Tensor tensor;
    final List<Integer> backward;
    final int firstBackward;
    final List<Option> options = new ArrayList<>();
    int chosen = -1;
    int next;

    Candidate(TensorId tid, Tensor tensor, List<Integer> backward, int firstBackward) {
      this.tid = tid;
      this.tensor = tensor;
      this.backward = backward;
      this.firstBackward = firstBackward;
    }

    Option option() {
      return options.get(chosen);
    }

    double bestCostPerByte() {
      return options.get(next).costUs / Math.max(1, tensor.bytes());
    }
  }

  private final DataflowGraph g;
  private final Options o;
  private final long available;
  private final List<Candidate> candidates = new ArrayList<>();
  private final Map<TensorId, Candidate> byTensor = new HashMap<>();
  private int simulations;
  private final boolean[] recomputed;
  private final boolean swapFirst;
  /** Schedule positions of the ops (levelled schedule). */
  private int[] pos;
  private final java.util.Set<TensorId> swapped = new java.util.HashSet<>();

  private HybridPlanner(DataflowGraph g, Options o, boolean swapFirst) {
    this.g = g;
    this.o = o;
    this.swapFirst = swapFirst;
    this.available = (long) (o.budgetBytes() * o.memRatio());
    this.recomputed = new boolean[g.size()];
  }

  /**
   * Plans {@code g} for the options' budget.
   *
   * @throws PlanningException when no plan the planner finds fits; it names the smallest budget
   *                           that could work (the lowest peak reached, or the lower bound)
   */
  public static Result plan(DataflowGraph g, Options o) {
    Result a;
    try {
      a = new HybridPlanner(g, o, false).run();
    } catch (PlanningException e) {
      if (!o.swap() || !o.recompute()) {
        throw e;
      }
      // the cheapest-first loop can get stuck where swapping first still fits
      try {
        return new HybridPlanner(g, o, true).run();
      } catch (PlanningException e2) {
        throw e2.smallestBudgetBytes() < e.smallestBudgetBytes() ? e2 : e;
      }
    }
    if (!a.needed() || !o.swap() || !o.recompute() || g.size() > SMALL) {
      return a;
    }
    // a second start on small graphs: swap first, then turn swaps into recomputation where the
    // whole step gets faster (finds runs of recomputed ops next to runs of swapped ones, which
    // the cheapest-first loop interleaves)
    try {
      Result b = new HybridPlanner(g, o, true).run();
      LOG.info("[LMS][0] Hybrid starts: cheapest-first {} ms, swap-first {} ms",
          String.format("%.2f", a.predictedStepMs()), String.format("%.2f", b.predictedStepMs()));
      return b.predictedStepMs() < a.predictedStepMs() ? b : a;
    } catch (PlanningException e) {
      return a;
    }
  }

  private Result run() {
    long t0 = System.nanoTime();
    CostModel cm = o.costModel();
    double base = cm.computeMs(g);
    Sim before = simulate();
    if (before.peak <= available) {
      return new Result(SwapPlan.empty(params()), RecomputePlan.empty(), false, before.peak,
          before.peak, base, base, simulations);
    }
    long floor = LowerBound.of(g);
    if (floor > available) {
      throw impossible(floor, "resident tensors plus the largest op's working set need "
          + mib(floor) + " MiB");
    }
    findCandidates();
    Sim cur = simulate();
    boolean single = false;
    while (cur.peak > available && simulations < o.maxSimulations()) {
      List<Candidate> live = new ArrayList<>();
      for (TensorId t : cur.liveAtPeak) {
        Candidate c = byTensor.get(t);
        if (c != null && c.chosen < 0 && c.next < c.options.size()) {
          live.add(c);
        }
      }
      if (live.isEmpty()) {
        break;
      }
      live.sort(Comparator.comparingDouble(Candidate::bestCostPerByte)
          .thenComparingInt(c -> c.tid.op()).thenComparingInt(c -> c.tid.output()));
      List<Candidate> batch = new ArrayList<>();
      long covered = 0;
      // first pass: each candidate's cheapest option when it can take it; second pass: the
      // ones whose cheapest option was a recomputation next to another, with their next option
      for (int pass = 0; pass < 2; pass++) {
        for (Candidate c : live) {
          if (covered >= cur.peak - available || (single && !batch.isEmpty())) {
            break;
          }
          if (c.chosen >= 0) {
            continue;
          }
          int pick = pick(c);
          if (pick < 0 || (pass == 0 && !swapFirst && pick != c.next)) {
            continue;
          }
          set(c, pick);
          batch.add(c);
          covered += c.tensor.bytes();
        }
      }
      if (batch.isEmpty()) {
        live.get(0).next++;
        continue;
      }
      Sim s = simulate();
      if (s != null && s.peak < cur.peak) {
        cur = s;
        single = false;
        continue;
      }
      for (Candidate c : batch) {
        undo(c);
      }
      if (batch.size() > 1) {
        single = true;
      } else {
        batch.get(0).next++;
        single = false;
      }
    }
    if (cur.peak > available) {
      long best = Math.max(cur.peak, floor);
      throw impossible(best, "the lowest simulated peak the hybrid planner reached was "
          + mib(cur.peak) + " MiB");
    }
    cur = upgrade(cur);
    cur = prune(cur);
    if (g.size() <= SMALL) {
      cur = improve(cur);
    }
    SwapPlan sp = cur.swaps;
    RecomputePlan rp = cur.recompute;
    double step = PlanCosts.stepMs(cm, g, sp, rp);
    LOG.info("[LMS][0] Hybrid plan: {} swapped tensors ({} MiB), {} recomputed ops in {} groups;"
        + " predicted peak {} MiB -> {} MiB, step {} ms -> {} ms ({} simulations, {} ms)",
        sp.swapOuts().size(), mib(sp.swapOutBytes()), rp.clonedOps(), rp.groups().size(),
        mib(before.peak), mib(cur.peak), String.format("%.1f", base),
        String.format("%.1f", step), simulations, (System.nanoTime() - t0) / 1_000_000);
    return new Result(sp, rp, true, before.peak, cur.peak, base, step, simulations);
  }

  /**
   * Turns swaps into recomputations where that is predicted cheaper and the plan still fits,
   * most expensive swaps first; here a recomputed op may read another recomputed op (they
   * become one group whose clones read each other), which the main loop avoids.
   */
  private Sim upgrade(Sim cur) {
    CostModel cm = o.costModel();
    List<Candidate> swapped = chosenMostExpensiveFirst(true);
    int chunk = Math.max(1, swapped.size() / 32);
    int limit = g.size() <= SMALL ? Math.max(o.pruneLimit(), swapped.size()) : o.pruneLimit();
    int tries = 0;
    for (int from = 0; from < swapped.size() && tries < limit; from += chunk) {
      List<Candidate> part = new ArrayList<>();
      List<Integer> was = new ArrayList<>();
      for (Candidate c : swapped.subList(from, Math.min(swapped.size(), from + chunk))) {
        for (int k = 0; k < c.options.size(); k++) {
          Option op = c.options.get(k);
          if (op.kind() == Kind.RECOMPUTE && op.costUs() < c.option().costUs()) {
            part.add(c);
            was.add(c.chosen);
            set(c, k);
            break;
          }
        }
      }
      if (part.isEmpty()) {
        continue;
      }
      tries++;
      Sim s = simulate();
      if (s != null && s.peak <= available && (g.size() > SMALL
          || PlanCosts.stepMs(cm, g, s.swaps, s.recompute) < PlanCosts.stepMs(cm, g, cur.swaps, cur.recompute))) {
        cur = s;
        continue;
      }
      for (int k = 0; k < part.size(); k++) {
        set(part.get(k), was.get(k));
      }
    }
    return cur;
  }

  /**
   * Local search on small graphs: for each decision, most expensive first, tries keeping the
   * tensor and each other option, and takes a change when the plan still fits and the cost
   * model predicts the whole step faster (this sees what per-candidate costs miss, such as the
   * extra swap-in a recompute clone needs when it reads a swapped tensor).
   */
  private Sim improve(Sim cur) {
    CostModel cm = o.costModel();
    double[] best = {PlanCosts.stepMs(cm, g, cur.swaps, cur.recompute)};
    Sim[] at = {cur};
    List<Candidate> all = new ArrayList<>(candidates);
    all.sort(Comparator.comparingDouble((Candidate c) -> c.chosen < 0 ? 0 : -c.option().costUs)
        .thenComparingInt(c -> c.tid.op()));
    // pairs of neighbours (the producer of one reads the other): changes that only pay together
    List<Candidate[]> pairs = new ArrayList<>();
    for (Candidate d : all) {
      for (TensorId in : g.op(d.tid.op()).inputs()) {
        Candidate c = byTensor.get(in);
        if (c != null) {
          pairs.add(new Candidate[] {c, d});
        }
      }
    }
    for (int round = 0; round < 3; round++) {
      boolean changed = false;
      for (Candidate c : all) {
        changed |= tryAll(new Candidate[] {c}, best, at);
      }
      for (Candidate[] p : pairs) {
        if (simulations >= o.maxSimulations() * 8) {
          break;
        }
        changed |= tryAll(p, best, at);
      }
      if (!changed) {
        break;
      }
    }
    simulate();
    return at[0];
  }

  /** Tries every combination of options (keep included) for {@code cs}; keeps the fastest. */
  private boolean tryAll(Candidate[] cs, double[] best, Sim[] at) {
    CostModel cm = o.costModel();
    int[] was = new int[cs.length];
    for (int i = 0; i < cs.length; i++) {
      was[i] = cs[i].chosen;
    }
    int[] k = new int[cs.length];
    java.util.Arrays.fill(k, -1);
    boolean changed = false;
    while (true) {
      boolean same = true;
      for (int i = 0; i < cs.length; i++) {
        same &= k[i] == was[i];
      }
      if (!same) {
        for (int i = 0; i < cs.length; i++) {
          set(cs[i], k[i]);
        }
        Sim s = simulate();
        double t = s != null && s.peak <= available
            ? PlanCosts.stepMs(cm, g, s.swaps, s.recompute) : Double.POSITIVE_INFINITY;
        if (t < best[0] - 1e-9) {
          best[0] = t;
          at[0] = s;
          was = k.clone();
          changed = true;
        }
        for (int i = 0; i < cs.length; i++) {
          set(cs[i], was[i]);
        }
      }
      int i = 0;
      while (i < cs.length && ++k[i] >= cs[i].options.size()) {
        k[i] = -1;
        i++;
      }
      if (i == cs.length) {
        break;
      }
    }
    return changed;
  }

  private void set(Candidate c, int k) {
    undo(c);
    c.chosen = k;
    if (k >= 0 && c.option().kind() == Kind.RECOMPUTE) {
      recomputed[c.tid.op()] = true;
    } else if (k >= 0) {
      swapped.add(c.tid);
    }
  }

  /** The decided candidates (only the swapped ones if asked), most expensive option first. */
  private List<Candidate> chosenMostExpensiveFirst(boolean swapsOnly) {
    List<Candidate> out = new ArrayList<>();
    for (Candidate c : candidates) {
      if (c.chosen >= 0 && (!swapsOnly || c.option().kind() == Kind.SWAP)) {
        out.add(c);
      }
    }
    out.sort(Comparator.comparingDouble((Candidate c) -> -c.option().costUs)
        .thenComparingInt(c -> c.tid.op()));
    return out;
  }

  /** Undoes the most expensive decisions while the plan still fits. */
  private Sim prune(Sim cur) {
    List<Candidate> chosen = chosenMostExpensiveFirst(false);
    // undo in chunks (1/32 of the decisions each) so that large graphs need few simulations;
    // small graphs (simulations are cheap) try every decision
    int chunk = Math.max(1, chosen.size() / 32);
    int limit = g.size() <= SMALL ? Math.max(o.pruneLimit(), chosen.size()) : o.pruneLimit();
    int tries = 0;
    for (int from = 0; from < chosen.size() && tries < limit; from += chunk) {
      tries++;
      List<Candidate> part = chosen.subList(from, Math.min(chosen.size(), from + chunk));
      int[] was = new int[part.size()];
      for (int k = 0; k < was.length; k++) {
        was[k] = part.get(k).chosen;
        undo(part.get(k));
      }
      Sim s = simulate();
      if (s != null && s.peak <= available) {
        cur = s;
        continue;
      }
      for (int k = 0; k < was.length; k++) {
        set(part.get(k), was[k]);
      }
    }
    return cur;
  }

  /**
   * The option to try for {@code c}: its next one, or when that recomputes an op next to one
   * already recomputed (a clone would keep the other's original alive, or a merged group would
   * hold all clones at once), its next swap option; -1 when there is none.
   */
  private int pick(Candidate c) {
    int best = -1;
    double bestUs = Double.POSITIVE_INFINITY;
    boolean canSwap = false;
    for (int k = c.next; k < c.options.size(); k++) {
      canSwap |= c.options.get(k).kind() == Kind.SWAP;
    }
    for (int k = c.next; k < c.options.size(); k++) {
      if (c.options.get(k).kind() == Kind.RECOMPUTE
          && ((swapFirst && canSwap) || nextToRecomputed(c.tid.op()))) {
        continue;
      }
      double us = c.options.get(k).costUs();
      if (us < bestUs) {
        bestUs = us;
        best = k;
      }
    }
    return best;
  }

  private boolean nextToRecomputed(int v) {
    if (recomputed[v]) {
      return false; // another output of the same op: same clone
    }
    for (TensorId in : g.op(v).inputs()) {
      if (recomputed[in.op()]) {
        return true;
      }
    }
    for (int s : g.successors(v)) {
      if (recomputed[s]) {
        return true;
      }
    }
    return false;
  }

  private void undo(Candidate c) {
    swapped.remove(c.tid);
    if (c.chosen >= 0 && c.option().kind() == Kind.RECOMPUTE) {
      boolean other = false;
      for (Candidate d : candidates) {
        other |= d != c && d.tid.op() == c.tid.op() && d.chosen >= 0
            && d.option().kind() == Kind.RECOMPUTE;
      }
      recomputed[c.tid.op()] = other;
    }
    c.chosen = -1;
  }

  private PlanningException impossible(long peak, String why) {
    long need = (long) Math.ceil(peak / o.memRatio());
    return new PlanningException("A budget of " + mib(o.budgetBytes()) + " MiB cannot work with "
        + (o.swap() && o.recompute() ? "swapping and recomputation" : o.swap() ? "swapping"
        : "recomputation") + ": " + why + ", so the smallest budget that could work is about "
        + ((need + (1 << 20) - 1) >> 20) + " MiB (at memory ratio " + o.memRatio() + ").", need);
  }

  private SwapParams params() {
    return SwapParams.defaults().toBuilder().swapoutThreshold(0).swapinAhead(1).swapinGroupby(0)
        .tier(o.tier()).build();
  }

  // ---- candidates

  private void findCandidates() {
    Levels lv = Levels.of(g);
    pos = new int[g.size()];
    int[] order = lv.schedule();
    for (int i = 0; i < order.length; i++) {
      pos[order[i]] = i;
    }
    double[] start = new double[g.size()];
    double[] end = new double[g.size()];
    double t = 0;
    for (int v : order) {
      start[v] = t;
      t += o.costModel().opUs(g, g.op(v));
      end[v] = t;
    }
    boolean[] foldable = g.constantFoldable();
    for (Op prod : g.ops()) {
      if (MemorySimulator.isPinned(prod) || foldable[prod.id()]
          || prod.name().startsWith(OpTypes.LMS_PREFIX)) {
        continue;
      }
      for (int i = 0; i < prod.outputs().size(); i++) {
        Tensor tensor = prod.output(i);
        if (tensor.persistent() || tensor.bytes() == 0) {
          continue;
        }
        TensorId tid = new TensorId(prod.id(), i);
        int lastForward = pos[prod.id()];
        List<Integer> backward = new ArrayList<>();
        int first = -1;
        for (int c : Arrays.stream(g.consumers(tid)).distinct().sorted().toArray()) {
          Op co = g.op(c);
          if (OpTypes.SHAPE_ONLY.contains(co.type())) {
            continue;
          }
          if (co.category() == OpCategory.FORWARD) {
            lastForward = Math.max(lastForward, pos[c]);
          } else {
            backward.add(c);
            if (first < 0 || pos[c] < pos[first]) {
              first = c;
            }
          }
        }
        if (first < 0 || pos[first] <= lastForward
            || backward.stream().anyMatch(c -> OpTypes.orderSensitive(g.op(c)))) {
          // (an n-ary sum reading it must keep reading the original: OpTypes.orderSensitive)
          continue;
        }
        Candidate cand = new Candidate(tid, tensor, backward, first);
        if (o.swap() && !Fusions.intermediate(g, tid) && !NOT_SWAPPABLE.contains(tensor.dtype())
            && tensor.rank() >= 1
            && !SwapParams.BUILTIN_EXCLUDED_TYPES.contains(prod.type())) {
          Option sw = swapOption(cand, pos, start, end, lastForward);
          if (sw != null) {
            cand.options.add(sw);
          }
        }
        if (o.recompute() && RecomputePlanner.recomputable(prod)
            && !Fusions.unsafeToRecompute(g, prod)) {
          List<String> trig = recomputeTriggers(first, prod.id());
          if (!trig.isEmpty()) {
            cand.options.add(new Option(Kind.RECOMPUTE, o.costModel().opUs(g, prod), trig));
          }
        }
        if (!cand.options.isEmpty()) {
          cand.options.sort(Comparator.comparingDouble(Option::costUs)
              .thenComparing(Option::kind));
          candidates.add(cand);
          byTensor.put(tid, cand);
        }
      }
    }
  }

  /**
   * The swap option: the trigger is a backward ancestor of the first backward reader, scheduled
   * after the tensor's last forward use; with overlap the latest one whose compute up to the
   * reader hides the swap-in, else (or when none hides it) the reader's nearest such ancestor.
   */
  private Option swapOption(Candidate c, int[] pos, double[] start, double[] end,
      int lastForward) {
    CostModel cm = o.costModel();
    double x = cm.transferUs(c.tensor.bytes(), o.tier());
    int reader = c.firstBackward;
    int producer = c.tid.op();
    ArrayDeque<Integer> queue = new ArrayDeque<>();
    Set<Integer> seen = new LinkedHashSet<>();
    queue.add(reader);
    seen.add(reader);
    int nearest = -1;
    int hiding = -1;
    while (!queue.isEmpty() && seen.size() < TRIGGER_SEARCH) {
      int v = queue.poll();
      for (int p : g.predecessors(v)) {
        Op po = g.op(p);
        if (p == producer || MemorySimulator.isPinned(po) || !seen.add(p)
            || po.category() == OpCategory.FORWARD || pos[p] <= lastForward) {
          continue;
        }
        queue.add(p);
        if (nearest < 0 || pos[p] > pos[nearest]) {
          nearest = p;
        }
        if (start[reader] - end[p] >= x && (hiding < 0 || pos[p] > pos[hiding])) {
          hiding = p;
        }
      }
    }
    if (nearest < 0) {
      return null;
    }
    int trig = cm.overlap() && hiding >= 0 ? hiding : nearest;
    double cost;
    if (cm.overlap()) {
      double outWindow = Math.max(0, end[trig] - end[producer]);
      double inWindow = Math.max(0, start[reader] - end[trig]);
      cost = Math.max(0, x - outWindow) + Math.max(0, x - inWindow);
    } else {
      cost = 2 * x;
    }
    return new Option(Kind.SWAP, cost, List.of(g.op(trig).name()));
  }

  /** Backward (else any) non-resident inputs of the first backward reader but the producer. */
  private List<String> recomputeTriggers(int reader, int producer) {
    List<String> backward = new ArrayList<>();
    List<String> any = new ArrayList<>();
    for (int p : g.predecessors(reader)) {
      Op po = g.op(p);
      if (p == producer || MemorySimulator.isPinned(po)) {
        continue;
      }
      any.add(po.name());
      if (po.category() != OpCategory.FORWARD) {
        backward.add(po.name());
      }
    }
    return backward.isEmpty() ? any : backward;
  }

  // ---- plans from decisions, and their simulation

  private record Sim(long peak, List<TensorId> liveAtPeak, SwapPlan swaps,
      RecomputePlan recompute) {}

  /** Builds the plans of the current decisions and simulates them; null on a cycle. */
  private RecomputePlan lastRecompute;
  private DataflowGraph lastRecomputed;

  private Sim simulate() {
    simulations++;
    RecomputePlan rp = recomputePlan();
    SwapPlan sp = swapPlan(rp);
    DataflowGraph r;
    int[] order;
    try {
      if (!rp.equals(lastRecompute)) {
        // many steps change only the swaps: the recomputed graph is reused
        lastRecomputed = RecomputeApplier.apply(g, rp);
        lastRecompute = rp;
      }
      r = PlanApplier.apply(lastRecomputed, sp);
      order = Levels.of(r).schedule();
    } catch (IllegalArgumentException e) {
      LOG.debug("plan rejected: {}", e.getMessage());
      return null;
    }
    MemoryProfile prof = MemorySimulator.simulate(r, order);
    int at = prof.peakAt();
    List<TensorId> live = new ArrayList<>();
    if (at >= 0) {
      int[] pos = new int[r.size()];
      for (int i = 0; i < order.length; i++) {
        pos[order[i]] = i;
      }
      for (Candidate c : candidates) {
        int p = pos[c.tid.op()];
        if (p > at) {
          continue;
        }
        int last = p;
        for (int u : r.consumers(c.tid)) {
          if (!OpTypes.SHAPE_ONLY.contains(r.op(u).type())) {
            last = Math.max(last, pos[u]);
          }
        }
        if (last >= at) {
          live.add(c.tid);
        }
      }
    }
    return new Sim(prof.peakBytes(), live, sp, rp);
  }

  private RecomputePlan recomputePlan() {
    int n = g.size();
    int[] parent = new int[n];
    boolean[] member = new boolean[n];
    for (int i = 0; i < n; i++) {
      parent[i] = i;
    }
    Map<Integer, List<Candidate>> byOp = new TreeMap<>();
    for (Candidate c : candidates) {
      if (c.chosen >= 0 && c.option().kind() == Kind.RECOMPUTE) {
        member[c.tid.op()] = true;
        byOp.computeIfAbsent(c.tid.op(), k -> new ArrayList<>()).add(c);
      }
    }
    if (byOp.isEmpty()) {
      return RecomputePlan.empty();
    }
    for (int v : byOp.keySet()) {
      for (TensorId in : g.op(v).inputs()) {
        if (member[in.op()]) {
          UnionFind.union(parent, v, in.op());
        }
      }
    }
    Map<Integer, List<Integer>> comps = new TreeMap<>();
    for (int v : g.topologicalOrder()) {
      if (member[v]) {
        comps.computeIfAbsent(UnionFind.find(parent, v), k -> new ArrayList<>()).add(v);
      }
    }
    List<RecomputePlan.Group> groups = new ArrayList<>();
    for (List<Integer> ops : comps.values()) {
      List<RecomputePlan.Repoint> repoints = new ArrayList<>();
      long bytes = 0;
      Candidate earliest = null;
      for (int v : ops) {
        for (Candidate c : byOp.get(v)) {
          bytes += c.tensor.bytes();
          for (int u : c.backward) {
            repoints.add(new RecomputePlan.Repoint(g.op(u).name(), g.op(v).name(),
                c.tid.output()));
          }
          if (earliest == null || c.firstBackward < earliest.firstBackward) {
            earliest = c;
          }
        }
      }
      Set<String> names = new LinkedHashSet<>();
      for (int v : ops) {
        names.add(g.op(v).name());
      }
      List<String> trig = new ArrayList<>(earliest.option().triggers());
      trig.removeIf(names::contains);
      if (trig.isEmpty()) {
        trig = earliest.option().triggers();
      }
      groups.add(new RecomputePlan.Group("h" + ops.get(0), names.stream().toList(), repoints,
          trig, bytes));
    }
    return new RecomputePlan(groups);
  }

  private SwapPlan swapPlan(RecomputePlan rp) {
    // clones that read a swapped tensor get their own swap-in, triggered with their group
    Map<String, List<RecomputePlan.Group>> readers = new HashMap<>();
    for (RecomputePlan.Group gr : rp.groups()) {
      Set<String> members = new LinkedHashSet<>(gr.ops());
      for (String name : gr.ops()) {
        for (TensorId in : g.opOrThrow(name).inputs()) {
          if (!members.contains(g.op(in.op()).name())) {
            readers.computeIfAbsent(g.tensorName(in), k -> new ArrayList<>()).add(gr);
          }
        }
      }
    }
    List<SwapPlan.SwapOut> outs = new ArrayList<>();
    for (Candidate c : candidates) {
      if (c.chosen < 0 || c.option().kind() != Kind.SWAP) {
        continue;
      }
      Op prod = g.op(c.tid.op());
      String base = prod.name() + "_" + c.tid.output();
      // one swap-in serves the backward readers and the clones that read the tensor; it waits
      // for the earlier of its own trigger and the clones' group triggers
      List<String> consumers = new ArrayList<>();
      c.backward.forEach(u -> consumers.add(g.op(u).name()));
      List<String> triggers = c.option().triggers();
      int first = earliest(triggers);
      for (RecomputePlan.Group gr : readers.getOrDefault(g.tensorName(c.tid), List.of())) {
        for (String name : gr.ops()) {
          for (TensorId in : g.opOrThrow(name).inputs()) {
            if (in.equals(c.tid)) {
              consumers.add(RecomputePlan.cloneName(gr.name(), name));
              break;
            }
          }
        }
        int e = earliest(gr.triggers());
        if (e < first) {
          first = e;
          triggers = gr.triggers();
        }
      }
      List<SwapPlan.SwapIn> ins = List.of(new SwapPlan.SwapIn(OpTypes.LMS_PREFIX + "swapin/"
          + base + "/0", consumers, triggers));
      outs.add(new SwapPlan.SwapOut(prod.name(), c.tid.output(), c.tensor.dtype(),
          c.tensor.bytes(), OpTypes.LMS_PREFIX + "swapout/" + base, ins, List.of()));
    }
    return new SwapPlan(params(), outs, List.of());
  }

  /** The earliest schedule position among the named ops. */
  private int earliest(List<String> ops) {
    int e = Integer.MAX_VALUE;
    for (String name : ops) {
      e = Math.min(e, pos[g.opOrThrow(name).id()]);
    }
    return e;
  }


  private static long mib(long b) {
    return b >> 20;
  }
}
