package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.plan.HybridCandidate.Kind;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Plans and simulation for {@link HybridPlanner}: builds the recompute and swap plans of the
 * current decisions, applies both to the graph model (recompute first) and simulates the
 * levelled schedule of the result, reporting the peak and the candidates alive at it.
 */
final class HybridEvaluator {
  private static final Logger LOG = LoggerFactory.getLogger(HybridPlanner.class);

  /**
   * One simulated plan.
   *
   * @param peak       simulated peak, bytes
   * @param liveAtPeak candidates whose tensors are alive while the peak op runs
   * @param swaps      the swap plan (names refer to the graph with {@code recompute} applied)
   * @param recompute  the recompute plan
   */
  record Sim(long peak, List<TensorId> liveAtPeak, SwapPlan swaps, RecomputePlan recompute) {}

  private final DataflowGraph g;
  private final HybridState state;
  private final TensorPolicy policy;
  private final SwapParams params;
  /** Schedule positions of the ops of {@code g} (levelled schedule). */
  private final int[] pos;
  private int simulations;
  private RecomputePlan lastRecompute;
  private DataflowGraph lastRecomputed;
  /**
   * The peaks and candidates alive at them of the decision sets already simulated, by the
   * option each candidate chose ({@link #decisions}): the refinements try many decision sets the
   * search (or an earlier refinement) already simulated. The plans are a function of the
   * decisions, so only what the simulation found is kept (a few KB a set). Least recently used
   * first out.
   */
  private final Map<String, Remembered> seen = new java.util.LinkedHashMap<>(256, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Remembered> e) {
      return size() > SEEN_MAX;
    }
  };
  private static final int SEEN_MAX = 4096;

  /** What a simulation of a decision set found. */
  private record Remembered(long peak, List<TensorId> liveAtPeak) {}

  private int repeats;

  HybridEvaluator(DataflowGraph g, HybridState state, TensorPolicy policy, Tier tier,
      int[] pos) {
    this.g = g;
    this.state = state;
    this.policy = policy;
    this.params = params(tier);
    this.pos = pos;
  }

  /** The swap parameters the hybrid planner's swap plans carry. */
  static SwapParams params(Tier tier) {
    return SwapParams.defaults().toBuilder().swapoutThreshold(0).swapinAhead(1).swapinGroupby(0)
        .tier(tier).build();
  }

  /**
   * Simulations asked for so far (the search's budget counts them; a plan already simulated is
   * answered from {@link #seen} and counted too, so the search takes the same steps).
   */
  int simulations() {
    return simulations;
  }

  /** Of {@link #simulations()}, those answered from plans already simulated. */
  int repeats() {
    return repeats;
  }

  /**
   * The current decisions applied to the graph model and simulated in its levelled schedule.
   *
   * @param rp      the recomputation plan
   * @param sp      the swap plan
   * @param model   the graph model with both applied
   * @param order   its levelled schedule
   * @param pos     each op's position in {@code order}
   * @param profile the simulation
   */
  private record Applied(RecomputePlan rp, SwapPlan sp, DataflowGraph model, int[] order,
      int[] pos, MemoryProfile profile) {}

  /**
   * Builds the plans of the current decisions, applies them and simulates the result.
   *
   * @throws IllegalArgumentException when the plans close a cycle
   */
  private Applied apply() {
    RecomputePlan rp = recomputePlan();
    SwapPlan sp = swapPlan(rp);
    if (!rp.equals(lastRecompute)) {
      // many steps change only the swaps: the recomputed graph is reused
      lastRecomputed = RecomputeApplier.apply(g, rp);
      lastRecompute = rp;
    }
    DataflowGraph r = PlanApplier.apply(lastRecomputed, sp);
    int[] order = Levels.of(r).schedule();
    int[] pos = new int[r.size()];
    for (int i = 0; i < order.length; i++) {
      pos[order[i]] = i;
    }
    return new Applied(rp, sp, r, order, pos, MemorySimulator.simulate(r, order));
  }

  /** Builds the plans of the current decisions and simulates them; null on a cycle. */
  Sim simulate() {
    simulations++;
    String key = decisions();
    Remembered m = seen.get(key);
    if (m != null) {
      repeats++;
      RecomputePlan rp = recomputePlan();
      return new Sim(m.peak(), m.liveAtPeak(), swapPlan(rp), rp);
    }
    Sim s = simulateNew();
    if (s != null) {
      seen.put(key, new Remembered(s.peak(), List.copyOf(s.liveAtPeak())));
    }
    return s;
  }

  /** The decision set: per candidate (in discovery order), the option chosen (0: kept). */
  private String decisions() {
    char[] k = new char[state.candidates.size()];
    for (int i = 0; i < k.length; i++) {
      k[i] = (char) (state.candidates.get(i).chosen + 1);
    }
    return new String(k);
  }

  private Sim simulateNew() {
    Applied a;
    try {
      a = apply();
    } catch (IllegalArgumentException e) {
      LOG.debug("plan rejected: {}", e.getMessage());
      return null;
    }
    DataflowGraph r = a.model();
    int at = a.profile().peakAt();
    List<TensorId> live = new ArrayList<>();
    if (at >= 0) {
      int[] rpos = a.pos();
      for (HybridCandidate c : state.candidates) {
        int p = rpos[c.tid.op()];
        if (p > at) {
          continue;
        }
        int last = p;
        for (int u : r.consumers(c.tid)) {
          if (!OpTypes.SHAPE_ONLY.contains(r.op(u).type())) {
            last = Math.max(last, rpos[u]);
          }
        }
        if (last >= at) {
          live.add(c.tid);
        }
      }
    }
    return new Sim(a.profile().peakBytes(), live, a.sp(), a.rp());
  }

  /**
   * For the debug log when the search gives up: the op at the simulated peak of the current
   * decisions and the largest tensors alive while it runs, each with what the planner could do
   * with it (not a candidate; kept with options left; swapped; recomputed).
   */
  String describePeak(int top) {
    Applied applied = apply();
    DataflowGraph r = applied.model();
    int[] order = applied.order();
    MemoryProfile prof = applied.profile();
    int at = prof.peakAt();
    if (at < 0) {
      return "the peak is resident memory";
    }
    int[] rpos = applied.pos();
    List<TensorId> live = new ArrayList<>();
    Map<TensorId, String> lastReader = new HashMap<>();
    for (int v : order) {
      if (rpos[v] > at || MemorySimulator.isPinned(r.op(v))) {
        continue;
      }
      for (int k = 0; k < r.op(v).outputs().size(); k++) {
        TensorId t = new TensorId(v, k);
        int last = rpos[v];
        for (int u : r.consumers(t)) {
          last = Math.max(last, rpos[u]);
        }
        if (last >= at && r.tensor(t).bytes() > 0) {
          live.add(t);
          lastReader.put(t, r.op(order[last]).name());
        }
      }
    }
    live.sort((a, b) -> Long.compare(r.tensor(b).bytes(), r.tensor(a).bytes()));
    StringBuilder sb = new StringBuilder("peak ").append(prof.peakBytes() >> 20)
        .append(" MiB at ").append(r.op(order[at]).name()).append(" (position ").append(at)
        .append(" of ").append(order.length).append("); largest live:");
    for (TensorId t : live.subList(0, Math.min(top, live.size()))) {
      String name = r.tensorName(t);
      String what = "not a candidate";
      java.util.Optional<Op> inG = g.op(r.op(t.op()).name());
      if (inG.isPresent()) {
        HybridCandidate c = state.of(new TensorId(inG.get().id(), t.output()));
        if (c != null) {
          what = c.chosen >= 0 ? c.option().kind().toString()
              : "kept, " + (c.options.size() - c.next) + " options left";
        }
      } else {
        what = "added by the plan";
      }
      sb.append(String.format(" %s %.1f MiB [%s, produced at %d, last read by %s];", name,
          r.tensor(t).bytes() / 1048576.0, what, rpos[t.op()], lastReader.get(t)));
    }
    return sb.toString();
  }

  /** Recomputed producers that read each other form one group (clones read clones). */
  private RecomputePlan recomputePlan() {
    int n = g.size();
    int[] parent = new int[n];
    boolean[] member = new boolean[n];
    for (int i = 0; i < n; i++) {
      parent[i] = i;
    }
    Map<Integer, List<HybridCandidate>> byOp = new TreeMap<>();
    for (HybridCandidate c : state.candidates) {
      if (c.chose(Kind.RECOMPUTE)) {
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
      groups.add(group(ops, byOp));
    }
    return new RecomputePlan(groups);
  }

  private RecomputePlan.Group group(List<Integer> ops, Map<Integer, List<HybridCandidate>> byOp) {
    List<RecomputePlan.Repoint> repoints = new ArrayList<>();
    long bytes = 0;
    HybridCandidate earliest = null;
    for (int v : ops) {
      for (HybridCandidate c : byOp.get(v)) {
        bytes += c.tensor.bytes();
        for (int u : c.option().consumers()) {
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
    return new RecomputePlan.Group("h" + ops.get(0), names.stream().toList(), repoints, trig,
        bytes);
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
    for (HybridCandidate c : state.candidates) {
      if (!c.chose(Kind.SWAP)) {
        continue;
      }
      Op prod = g.op(c.tid.op());
      String base = prod.name() + "_" + c.tid.output();
      // one swap-in serves the backward readers and the clones that read the tensor; it waits
      // for the earlier of its own trigger and the clones' group triggers
      List<String> consumers = new ArrayList<>();
      c.option().consumers().forEach(u -> consumers.add(g.op(u).name()));
      List<String> triggers = c.option().triggers();
      int first = earliest(triggers);
      for (RecomputePlan.Group gr : readers.getOrDefault(g.tensorName(c.tid), List.of())) {
        boolean reads = false;
        for (String name : gr.ops()) {
          Op member = g.opOrThrow(name);
          if (member.inputs().contains(c.tid) && cloneMaySwapIn(member)) {
            consumers.add(RecomputePlan.cloneName(gr.name(), name));
            reads = true;
          }
        }
        int e = earliest(gr.triggers());
        if (reads && e < first) {
          first = e;
          triggers = gr.triggers();
        }
      }
      List<SwapPlan.SwapIn> ins = List.of(new SwapPlan.SwapIn(OpTypes.LMS_PREFIX + "swapin/"
          + base + "/0", consumers, triggers));
      outs.add(new SwapPlan.SwapOut(prod.name(), c.tid.output(), c.tensor.dtype(),
          c.tensor.bytes(), OpTypes.LMS_PREFIX + "swapout/" + base, ins, List.of()));
    }
    return new SwapPlan(params, outs, List.of());
  }

  /**
   * True when the clone of {@code member} may read a swap-in. Clones are re-executions of
   * forward ops, not the consumers the built-in type exclusions guard, so they may unless the
   * user's input filters exclude the op they clone; a clone that may not reads the original,
   * which then stays alive until it runs (the simulation sees that).
   */
  private boolean cloneMaySwapIn(Op member) {
    return !policy.filtersSwaps() || policy.maySwapInto(member);
  }

  /** The earliest schedule position among the named ops. */
  private int earliest(List<String> ops) {
    int e = Integer.MAX_VALUE;
    for (String name : ops) {
      e = Math.min(e, pos[g.opOrThrow(name).id()]);
    }
    return e;
  }
}
