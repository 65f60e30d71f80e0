package dev.lms4j.core.plan;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.CostModel;
import dev.lms4j.core.memory.MemoryProfile;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.schedule.Scheduling;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Rematerialization under a memory limit, after XLA's {@code HloRematerialization} pass and
 * Microsoft's path heuristic for it: picks forward ops to recompute in the backward pass until
 * the simulated peak fits the limit. The output is a {@link RecomputePlan} (the ops chosen form
 * connected groups, see {@link RecomputePlanner#manual}) that {@code RecomputeRewriter} applies.
 *
 * <ul>
 *   <li>{@link Mode#STANDARD}: at the simulated peak, the live tensors that could be recomputed
 *       are scored by bytes saved at the peak (their size, minus inputs that the clone keeps
 *       alive across the peak) per microsecond of recompute time ({@link CostModel}); a block of
 *       up to {@code blockSizeLimit} ops (the tensor's producer and producers of its inputs
 *       that are dead at the peak) is recomputed together. The best blocks are tried, several
 *       at once while their estimated savings do not yet cover the excess; a try is kept when
 *       the simulated peak (or, at an equal peak, the bytes above the limit summed over the
 *       step) drops, else the block is rejected. When no block helps, the block size doubles up
 *       to {@code maxBlockSize} (XLA's {@code block_size_limit} growing by its factor).</li>
 *   <li>{@link Mode#PATH}: every recomputable forward op on a path into the backward pass is
 *       recomputed, then the articulation ops of those paths (ops whose removal splits a
 *       recomputed group: the checkpoints of Chen et al.) are kept again, expensive ones and
 *       evenly spread ones first, as long as the peak stays within the limit.</li>
 * </ul>
 *
 * Random and stateful ops, feeds, variables, constants and tensors smaller than
 * {@code smallNodeLimitBytes} are never recomputed. The search is bounded by
 * {@code maxSimulations} simulator runs; when the limit cannot be met, {@link #plan} throws a
 * {@link PlanningException} naming the smallest peak reached.
 *
 * <pre>{@code
 * Rematerializer.Result r = Rematerializer.plan(graph, 400L << 20,
 *     Rematerializer.Options.defaults().withMode(Rematerializer.Mode.PATH));
 * GraphDef out = RecomputeRewriter.rewrite(gd, r.plan());
 * }</pre>
 */
public final class Rematerializer {
  private static final Logger LOG = LoggerFactory.getLogger(Rematerializer.class);
  private static final String CLONE_PREFIX = OpTypes.LMS_PREFIX + "recompute/";

  /** How ops to recompute are chosen. */
  public enum Mode {
    /** XLA's greedy: best memory saved per recompute cost at the peak, in blocks. */
    STANDARD,
    /** Whole paths recomputed, then articulation ops kept while within the limit. */
    PATH;

    /** Parses {@code standard|path} (case-insensitive). */
    public static Mode parse(String s) {
      try {
        return valueOf(s.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("unknown remat mode '" + s
            + "' (expected standard or path)");
      }
    }
  }

  /**
   * Options of a run.
   *
   * @param mode                how ops are chosen
   * @param smallNodeLimitBytes ops whose transient outputs are smaller are never recomputed
   * @param blockSizeLimit      ops per recomputed block at first (XLA's block_size_limit)
   * @param maxBlockSize        the block size grows (doubling) up to this when nothing helps
   * @param scheduler           scheduling step run before planning
   * @param costModel           recompute cost of an op
   * @param maxSimulations      bound on simulator runs (the search stops there)
   */
  public record Options(Mode mode, long smallNodeLimitBytes, int blockSizeLimit, int maxBlockSize,
      Scheduling.Scheduler scheduler, CostModel costModel, int maxSimulations) {
    /** Checks the values. */
    public Options {
      Objects.requireNonNull(mode);
      Objects.requireNonNull(scheduler);
      Objects.requireNonNull(costModel);
      if (smallNodeLimitBytes < 0) {
        throw new IllegalArgumentException("small node limit must be >= 0");
      }
      if (blockSizeLimit < 1 || maxBlockSize < blockSizeLimit) {
        throw new IllegalArgumentException("need 1 <= blockSizeLimit <= maxBlockSize");
      }
      if (maxSimulations < 1) {
        throw new IllegalArgumentException("maxSimulations must be >= 1");
      }
    }

    /** Standard mode, no small-node limit, blocks of 1 growing to 16, no scheduling. */
    public static Options defaults() {
      return new Options(Mode.STANDARD, 0, 1, 16, Scheduling.Scheduler.NONE,
          CostModel.defaults(), 5000);
    }

    /** The same options in another mode. */
    public Options withMode(Mode m) {
      return new Options(m, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, scheduler,
          costModel, maxSimulations);
    }

    /** The same options with another small-node limit (bytes). */
    public Options withSmallNodeLimit(long bytes) {
      return new Options(mode, bytes, blockSizeLimit, maxBlockSize, scheduler, costModel,
          maxSimulations);
    }

    /** The same options with other block sizes. */
    public Options withBlockSizes(int initial, int max) {
      return new Options(mode, smallNodeLimitBytes, initial, max, scheduler, costModel,
          maxSimulations);
    }

    /** The same options with another scheduling step. */
    public Options withScheduler(Scheduling.Scheduler s) {
      return new Options(mode, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, s, costModel,
          maxSimulations);
    }

    /** The same options with another cost model. */
    public Options withCostModel(CostModel cm) {
      return new Options(mode, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, scheduler, cm,
          maxSimulations);
    }

    /** The same options with another bound on simulator runs. */
    public Options withMaxSimulations(int n) {
      return new Options(mode, smallNodeLimitBytes, blockSizeLimit, maxBlockSize, scheduler,
          costModel, n);
    }
  }

  /**
   * One step of the search, for the dump.
   *
   * @param step           index
   * @param action         {@code remat} (kept), {@code reject}, {@code grow-block}, {@code path}
   *                       (the initial whole-path set), {@code undo} (an articulation op kept
   *                       again), {@code keep-remat} (an undo that was refused) or
   *                       {@code standard} (path mode goes on in standard mode from here)
   * @param ops            the ops concerned
   * @param estimatedBytes estimated bytes saved at the peak (standard mode), else 0
   * @param costUs         predicted recompute time of the ops, microseconds
   * @param peakBytes      simulated peak after the step (kept or not)
   */
  public record Decision(int step, String action, List<String> ops, long estimatedBytes,
      double costUs, long peakBytes) {
    /** Copies the list. */
    public Decision {
      ops = List.copyOf(ops);
    }
  }

  /**
   * The outcome.
   *
   * @param plan        the ops to recompute
   * @param graph       the graph planned on (the input after the scheduling step); the plan's
   *                    triggers assume its order, so apply {@link #scheduling()} too
   * @param scheduling  the scheduling step's outcome
   * @param limitBytes  the limit
   * @param peakBefore  simulated peak of {@link #graph()} without recomputation
   * @param peakAfter   simulated peak with the plan
   * @param simulations simulator runs
   * @param decisions   the search, step by step
   * @param options     the options used
   */
  public record Result(RecomputePlan plan, DataflowGraph graph, Scheduling.Result scheduling,
      long limitBytes, long peakBefore, long peakAfter, int simulations,
      List<Decision> decisions, Options options) {
    /** Copies the list. */
    public Result {
      decisions = List.copyOf(decisions);
    }

    /** True when the simulated peak with the plan is within the limit. */
    public boolean fits() {
      return peakAfter <= limitBytes;
    }

    /** True when recomputation was needed (the peak without it was above the limit). */
    public boolean needed() {
      return peakBefore > limitBytes;
    }

    /**
     * Writes per-op memory (schedule position, op, type, category, bytes in use while it runs,
     * whether it is recomputed or a clone) and the decisions: JSON when the file name ends in
     * {@code .json}, else tab-separated text.
     */
    public void dump(Path file) {
      DataflowGraph rw = RecomputeApplier.apply(graph, plan);
      int[] order = Levels.of(rw).schedule();
      MemoryProfile prof = MemorySimulator.simulate(rw, order);
      Set<String> remat = new HashSet<>();
      plan.groups().forEach(gr -> remat.addAll(gr.ops()));
      try {
        if (file.getParent() != null) {
          Files.createDirectories(file.getParent());
        }
        if (file.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(".json")) {
          ObjectMapper om = new ObjectMapper();
          ObjectNode root = om.createObjectNode();
          root.put("schema", "lms4j-remat-dump/1").put("mode",
              options.mode().name().toLowerCase(Locale.ROOT))
              .put("limit_bytes", limitBytes).put("peak_before_bytes", peakBefore)
              .put("peak_after_bytes", peakAfter).put("fits", fits())
              .put("simulations", simulations).put("recomputed_ops", plan.clonedOps());
          ArrayNode ops = root.putArray("ops");
          for (int i = 0; i < order.length; i++) {
            Op op = rw.op(order[i]);
            ops.addObject().put("pos", i).put("op", op.name()).put("type", op.type())
                .put("category", op.category().name().toLowerCase(Locale.ROOT))
                .put("live_bytes", prof.timeline()[i]).put("status", status(op, remat));
          }
          ArrayNode ds = root.putArray("decisions");
          for (Decision d : decisions) {
            ObjectNode n = ds.addObject().put("step", d.step()).put("action", d.action())
                .put("estimated_bytes", d.estimatedBytes()).put("cost_us", d.costUs())
                .put("peak_bytes", d.peakBytes());
            d.ops().forEach(n.putArray("ops")::add);
          }
          om.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), root);
        } else {
          StringBuilder sb = new StringBuilder();
          sb.append("# lms4j remat dump: mode ").append(options.mode().name()
              .toLowerCase(Locale.ROOT)).append(", limit ").append(limitBytes)
              .append(" B, peak ").append(peakBefore).append(" B -> ").append(peakAfter)
              .append(" B, ").append(plan.clonedOps()).append(" ops recomputed, ")
              .append(simulations).append(" simulations\n");
          sb.append("pos\top\ttype\tcategory\tlive_bytes\tstatus\n");
          for (int i = 0; i < order.length; i++) {
            Op op = rw.op(order[i]);
            sb.append(i).append('\t').append(op.name()).append('\t').append(op.type())
                .append('\t').append(op.category().name().toLowerCase(Locale.ROOT))
                .append('\t').append(prof.timeline()[i]).append('\t')
                .append(status(op, remat)).append('\n');
          }
          sb.append("\n# decisions\nstep\taction\tops\testimated_bytes\tcost_us\tpeak_bytes\n");
          for (Decision d : decisions) {
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
      if (op.name().startsWith(CLONE_PREFIX)) {
        return "clone";
      }
      return remat.contains(op.name()) ? "rematerialized" : "kept";
    }
  }

  private Rematerializer() {}

  /**
   * Plans recomputation so that the simulated peak fits {@code limitBytes}.
   *
   * @throws PlanningException when it cannot; {@link PlanningException#smallestBudgetBytes()}
   *                           is the smallest peak reached
   */
  public static Result plan(DataflowGraph g, long limitBytes, Options o) {
    Result r = bestEffort(g, limitBytes, o);
    if (!r.fits()) {
      throw new PlanningException("Rematerialization (" + o.mode().name()
          .toLowerCase(Locale.ROOT) + ") cannot fit a limit of " + mibUp(limitBytes)
          + " MiB: the smallest simulated peak reached was " + mibUp(r.peakAfter())
          + " MiB, the smallest limit that could work with it.", r.peakAfter());
    }
    return r;
  }

  /** As {@link #plan}, but returns the lowest peak found instead of failing. */
  public static Result bestEffort(DataflowGraph g, long limitBytes, Options o) {
    long t0 = System.nanoTime();
    Scheduling.Result s = Scheduling.apply(g, o.scheduler());
    Search search = new Search(s.graph(), limitBytes, o);
    Result r = search.run(s);
    LOG.info("[LMS][0] Rematerialization ({}): {} ops recomputed in {} groups, simulated peak "
        + "{} MiB -> {} MiB (limit {} MiB), {} simulations, {} ms",
        o.mode().name().toLowerCase(Locale.ROOT), r.plan().clonedOps(), r.plan().groups().size(),
        r.peakBefore() >> 20, r.peakAfter() >> 20, limitBytes >> 20, r.simulations(),
        (System.nanoTime() - t0) / 1_000_000);
    return r;
  }

  private static long mibUp(long b) {
    return (b + (1 << 20) - 1) >> 20;
  }

  /** One search over one graph. */
  private static final class Search {
    private final DataflowGraph g;
    private final long limit;
    private final Options o;
    private final int n;
    private final boolean[] eligible;
    private final double[] costUs;
    private final boolean[] inS;
    private final List<Decision> decisions = new ArrayList<>();
    private int sims;

    Search(DataflowGraph g, long limit, Options o) {
      this.g = g;
      this.limit = limit;
      this.o = o;
      this.n = g.size();
      eligible = new boolean[n];
      costUs = new double[n];
      inS = new boolean[n];
      for (Op op : g.ops()) {
        eligible[op.id()] = RecomputePlanner.recomputable(op) && !Fusions.unsafeToRecompute(g, op)
            && op.transientOutputBytes() >= Math.max(1, o.smallNodeLimitBytes());
        costUs[op.id()] = eligible[op.id()] ? o.costModel().opUs(g, op) : 0;
      }
    }

    /** The plan for the current set, applied and simulated. */
    private final class Eval {
      final RecomputePlan plan;
      final DataflowGraph rw;
      final int[] pos;
      final MemoryProfile prof;
      final long area;

      Eval() {
        Set<String> names = new TreeSet<>();
        for (int v = 0; v < n; v++) {
          if (inS[v]) {
            names.add(g.op(v).name());
          }
        }
        plan = names.isEmpty() ? RecomputePlan.empty() : RecomputePlanner.manual(g, names);
        rw = RecomputeApplier.apply(g, plan);
        int[] order = Levels.of(rw).schedule();
        pos = new int[rw.size()];
        for (int i = 0; i < order.length; i++) {
          pos[order[i]] = i;
        }
        prof = MemorySimulator.simulate(rw, order);
        long a = 0;
        for (long t : prof.timeline()) {
          a += Math.max(0, t - limit);
        }
        area = a;
        sims++;
      }

      long peak() {
        return prof.peakBytes();
      }

      boolean betterThan(Eval e) {
        return peak() < e.peak() || (peak() == e.peak() && area < e.area);
      }
    }

    Result run(Scheduling.Result s) {
      Eval base = new Eval();
      Eval cur = base;
      if (base.peak() > limit) {
        cur = o.mode() == Mode.STANDARD ? standard(base) : path(base);
      }
      if (o.mode() == Mode.PATH && cur.peak() > limit && sims < o.maxSimulations()) {
        // the paths, their kept checkpoints and the greedy from there missed the limit (where
        // the undo step stops depends on recompute costs): the greedy from no recomputation
        boolean[] fromPaths = inS.clone();
        Arrays.fill(inS, false);
        decisions.add(new Decision(decisions.size(), "restart-standard", List.of(), 0, 0,
            base.peak()));
        Eval alt = standard(base);
        if (alt.betterThan(cur)) {
          cur = alt;
        } else {
          System.arraycopy(fromPaths, 0, inS, 0, n);
        }
      }
      return new Result(cur.plan, g, s, limit, base.peak(), cur.peak(), sims, decisions, o);
    }

    private void decide(String action, List<Integer> ops, long est, long peak) {
      double c = 0;
      List<String> names = new ArrayList<>();
      for (int v : ops) {
        c += costUs[v];
        names.add(g.op(v).name());
      }
      decisions.add(new Decision(decisions.size(), action, names, est, c, peak));
    }

    // ---------------------------------------------------------------- standard

    private record Candidate(List<Integer> block, long saved, double score) {}

    private Eval standard(Eval start) {
      Eval cur = start;
      int blockLimit = o.blockSizeLimit();
      Set<List<Integer>> rejected = new HashSet<>();
      while (cur.peak() > limit && sims < o.maxSimulations()) {
        List<Candidate> cands = candidates(cur, blockLimit, rejected);
        if (cands.isEmpty()) {
          if (blockLimit >= o.maxBlockSize()) {
            break;
          }
          blockLimit = Math.min(o.maxBlockSize(), blockLimit * 2);
          decisions.add(new Decision(decisions.size(), "grow-block",
              List.of("block size " + blockLimit), 0, 0, cur.peak()));
          continue;
        }
        // several disjoint blocks at once while their estimates do not yet cover the excess
        long excess = cur.peak() - limit;
        boolean[] touched = new boolean[n];
        List<Candidate> batch = new ArrayList<>();
        long sum = 0;
        for (Candidate c : cands) {
          if (sum >= excess) {
            break;
          }
          if (touches(c.block(), touched)) {
            continue;
          }
          mark(c.block(), touched);
          batch.add(c);
          sum += c.saved();
        }
        batch.forEach(c -> c.block().forEach(v -> inS[v] = true));
        Eval next = new Eval();
        if (batch.size() > 1 && !next.betterThan(cur)) {
          batch.forEach(c -> c.block().forEach(v -> inS[v] = false));
          batch = List.of(batch.get(0));
          batch.get(0).block().forEach(v -> inS[v] = true);
          next = new Eval();
        }
        if (next.betterThan(cur)) {
          for (Candidate c : batch) {
            decide("remat", c.block(), c.saved(), next.peak());
          }
          cur = next;
        } else {
          Candidate c = batch.get(0);
          c.block().forEach(v -> inS[v] = false);
          rejected.add(c.block());
          decide("reject", c.block(), c.saved(), next.peak());
        }
      }
      return cur;
    }

    private boolean touches(List<Integer> block, boolean[] touched) {
      for (int v : block) {
        if (touched[v]) {
          return true;
        }
      }
      return false;
    }

    private void mark(List<Integer> block, boolean[] touched) {
      for (int v : block) {
        touched[v] = true;
        for (int p : g.predecessors(v)) {
          touched[p] = true;
        }
        for (int c : g.successors(v)) {
          touched[c] = true;
        }
      }
    }

    /** Candidate blocks at the current peak, best score first. */
    private List<Candidate> candidates(Eval e, int blockLimit, Set<List<Integer>> rejected) {
      int p = e.prof.peakAt();
      List<Candidate> out = new ArrayList<>();
      if (p < 0) {
        return out;
      }
      DataflowGraph rw = e.rw;
      for (int v = 0; v < n; v++) {
        if (!eligible[v] || inS[v] || e.pos[v] >= p) {
          continue;
        }
        Candidate best = null;
        List<Integer> block = new ArrayList<>();
        block.add(v);
        for (int k = 1; k <= blockLimit; k++) {
          if (k > 1 && !grow(e, block, p)) {
            break;
          }
          List<Integer> key = block.stream().sorted().toList();
          if (rejected.contains(key)) {
            continue;
          }
          long saved = 0;
          for (int m : block) {
            saved += savedAtPeak(e, m, p);
          }
          if (saved <= 0) {
            if (k == 1) {
              break; // v's own outputs save nothing at the peak
            }
            continue;
          }
          long est = saved - extended(e, block, p);
          double cost = 0;
          for (int m : block) {
            cost += costUs[m];
          }
          double score = est / Math.max(cost, 1e-3);
          if (est > 0 && (best == null || score > best.score())) {
            best = new Candidate(key, est, score);
          }
        }
        if (best != null) {
          out.add(best);
        }
      }
      out.sort(Comparator.comparingDouble(Candidate::score).reversed()
          .thenComparing(c -> c.block().get(0)));
      return out;
    }

    /** Adds to the block the latest producer of a member's input that is dead at the peak. */
    private boolean grow(Eval e, List<Integer> block, int p) {
      int best = -1;
      for (int m : block) {
        for (TensorId in : g.op(m).inputs()) {
          int u = in.op();
          if (!eligible[u] || inS[u] || block.contains(u) || liveAt(e, in, p)) {
            continue;
          }
          if (best < 0 || e.pos[u] > e.pos[best]) {
            best = u;
          }
        }
      }
      if (best < 0) {
        return false;
      }
      block.add(best);
      return true;
    }

    /**
     * Bytes of {@code m}'s outputs that recomputing it frees at the peak: live there, read by
     * the backward pass (or a clone) only after it and by the forward pass only before it.
     */
    private long savedAtPeak(Eval e, int m, int p) {
      long saved = 0;
      Op op = g.op(m);
      for (int i = 0; i < op.outputs().size(); i++) {
        Tensor t = op.output(i);
        if (t.persistent()) {
          continue;
        }
        int[] readers = e.rw.consumers(new TensorId(m, i));
        boolean late = false;
        boolean ok = true;
        for (int r : readers) {
          Op ro = e.rw.op(r);
          if (OpTypes.SHAPE_ONLY.contains(ro.type())) {
            continue;
          }
          boolean isLate = ro.category() != OpCategory.FORWARD
              || ro.name().startsWith(CLONE_PREFIX);
          if (isLate) {
            late = true;
            ok &= e.pos[r] > p;
          } else {
            ok &= e.pos[r] < p;
          }
        }
        if (late && ok) {
          saved += t.bytes();
        }
      }
      return saved;
    }

    /** Bytes of the block's outside inputs that are dead at the peak (the clones extend them). */
    private long extended(Eval e, List<Integer> block, int p) {
      long b = 0;
      Set<TensorId> seen = new HashSet<>();
      for (int m : block) {
        for (TensorId in : g.op(m).inputs()) {
          Op u = g.op(in.op());
          if (block.contains(in.op()) || !seen.add(in) || inS[in.op()]
              || MemorySimulator.isPinned(u) || g.tensor(in).persistent()) {
            continue;
          }
          if (!liveAt(e, in, p)) {
            b += g.tensor(in).bytes();
          }
        }
      }
      return b;
    }

    /** True when tensor {@code t} is in memory while the op at position {@code p} runs. */
    private boolean liveAt(Eval e, TensorId t, int p) {
      if (e.pos[t.op()] > p) {
        return false;
      }
      int last = e.pos[t.op()];
      for (int r : e.rw.consumers(t)) {
        if (!OpTypes.SHAPE_ONLY.contains(e.rw.op(r).type())) {
          last = Math.max(last, e.pos[r]);
        }
      }
      return last >= p;
    }

    // ---------------------------------------------------------------- path

    private Eval path(Eval base) {
      // ops on paths into the backward pass: read by it, or read by such an op
      int[] topo = g.topologicalOrder();
      for (int i = topo.length - 1; i >= 0; i--) {
        int v = topo[i];
        if (!eligible[v]) {
          continue;
        }
        boolean useful = false;
        for (int j = 0; j < g.op(v).outputs().size() && !useful; j++) {
          for (int c : g.consumers(new TensorId(v, j))) {
            Op co = g.op(c);
            if (inS[c] || (co.category() != OpCategory.FORWARD
                && !OpTypes.SHAPE_ONLY.contains(co.type()))) {
              useful = true;
              break;
            }
          }
        }
        inS[v] = useful;
      }
      List<Integer> all = new ArrayList<>();
      for (int v = 0; v < n; v++) {
        if (inS[v]) {
          all.add(v);
        }
      }
      if (all.isEmpty()) {
        return base;
      }
      Eval cur = new Eval();
      decide("path", all, 0, cur.peak());
      if (!cur.betterThan(base) && cur.peak() > limit) {
        LOG.debug("whole paths peak at {} B, no lower than without recomputation", cur.peak());
      }
      List<Integer> arts = articulationOrder(topo);
      // 1. the longest prefix of the articulation order to keep: prefixes of 1, 2, 4, ... ops
      //    (the spread order makes a prefix of k about every (m/k)-th op), then bisection
      //    between the longest that fits and the next one tried
      int m = arts.size();
      int fitK = -1;
      int failK = -1;
      Eval fitEval = null;
      Eval bestEval = cur;
      int bestK = 0;
      for (int k = 1; m > 0; k = Math.min(m, k * 2)) {
        Eval e = undone(arts, k);
        if (e.peak() <= limit) {
          fitK = k;
          fitEval = e;
          failK = -1;
        } else if (fitK >= 0 && failK < 0) {
          failK = k;
        }
        if (e.betterThan(bestEval)) {
          bestEval = e;
          bestK = k;
        }
        if (k == m || sims >= o.maxSimulations()) {
          break;
        }
      }
      if (fitK >= 0 && failK > fitK) {
        int lo = fitK;
        int hi = failK;
        // to within 1/32 of the articulation ops: the rest is left to step 2
        int tolerance = Math.max(1, m / 32);
        while (hi - lo > tolerance && sims < o.maxSimulations()) {
          int mid = (lo + hi) >>> 1;
          Eval e = undone(arts, mid);
          if (e.peak() <= limit) {
            lo = mid;
            fitEval = e;
          } else {
            hi = mid;
          }
        }
        fitK = lo;
      }
      int k = fitK >= 0 ? fitK : bestK;
      cur = fitK >= 0 ? fitEval : bestEval;
      setUndone(arts, k);
      if (k > 0) {
        decide("undo", arts.subList(0, k), 0, cur.peak());
      }
      // 2. the rest one chunk at a time (halving on failure), while the limit holds
      int idx = k;
      int chunk = Math.max(1, (m - idx) / 2);
      int tries = 0;
      while (cur.peak() <= limit && idx < m && tries++ < 8 && sims < o.maxSimulations()) {
        List<Integer> batch = arts.subList(idx, Math.min(m, idx + chunk));
        batch.forEach(v -> inS[v] = false);
        Eval next = new Eval();
        if (next.peak() <= limit) {
          decide("undo", batch, 0, next.peak());
          cur = next;
          idx += batch.size();
        } else {
          batch.forEach(v -> inS[v] = true);
          if (chunk > 1) {
            chunk = (chunk + 1) / 2;
          } else {
            decide("keep-remat", batch, 0, next.peak());
            idx++;
          }
        }
      }
      if (cur.peak() > limit && sims < o.maxSimulations()) {
        // the paths and their checkpoints alone do not fit: recompute more, XLA's way
        decisions.add(new Decision(decisions.size(), "standard", List.of(), 0, 0, cur.peak()));
        cur = standard(cur);
      }
      if (cur.peak() > limit && base.peak() < cur.peak()) {
        Arrays.fill(inS, false);
        return base;
      }
      return cur;
    }

    /** Evaluates the set with the first {@code k} articulation ops kept (not recomputed). */
    private Eval undone(List<Integer> arts, int k) {
      setUndone(arts, k);
      Eval e = new Eval();
      setUndone(arts, 0);
      return e;
    }

    private void setUndone(List<Integer> arts, int k) {
      for (int i = 0; i < arts.size(); i++) {
        inS[arts.get(i)] = i >= k;
      }
    }

    /**
     * Articulation ops of the recomputed set (undirected data edges inside it), expensive ones
     * first (by power-of-two buckets of recompute time), then spread evenly over the
     * topological order (bit-reversed rank), then by id.
     */
    private List<Integer> articulationOrder(int[] topo) {
      boolean[] art = articulationPoints();
      List<Integer> arts = new ArrayList<>();
      for (int v : topo) {
        if (art[v]) {
          arts.add(v);
        }
      }
      int m = arts.size();
      int bits = Math.max(1, 32 - Integer.numberOfLeadingZeros(Math.max(1, m - 1)));
      int[] spread = new int[n];
      for (int i = 0; i < m; i++) {
        spread[arts.get(i)] = Integer.reverse(i) >>> (32 - bits);
      }
      arts.sort(Comparator.<Integer>comparingInt(
              v -> -(int) Math.floor(Math.log(Math.max(1, costUs[v])) / Math.log(2)))
          .thenComparingInt(v -> spread[v]).thenComparingInt(v -> v));
      return arts;
    }

    /** Articulation points of the undirected graph of data edges among ops in the set. */
    private boolean[] articulationPoints() {
      int[][] adj = new int[n][];
      int[] deg = new int[n];
      List<int[]> edges = new ArrayList<>();
      for (int v = 0; v < n; v++) {
        if (!inS[v]) {
          continue;
        }
        for (int u : g.predecessors(v)) {
          if (inS[u] && isDataEdge(u, v)) {
            edges.add(new int[] {u, v});
            deg[u]++;
            deg[v]++;
          }
        }
      }
      for (int v = 0; v < n; v++) {
        adj[v] = new int[deg[v]];
        deg[v] = 0;
      }
      for (int[] e : edges) {
        adj[e[0]][deg[e[0]]++] = e[1];
        adj[e[1]][deg[e[1]]++] = e[0];
      }
      int[] disc = new int[n];
      int[] low = new int[n];
      int[] parent = new int[n];
      int[] next = new int[n];
      int[] children = new int[n];
      boolean[] art = new boolean[n];
      Arrays.fill(disc, -1);
      int time = 0;
      int[] stack = new int[n];
      for (int root = 0; root < n; root++) {
        if (!inS[root] || disc[root] >= 0) {
          continue;
        }
        int sp = 0;
        stack[sp++] = root;
        parent[root] = -1;
        disc[root] = low[root] = time++;
        while (sp > 0) {
          int v = stack[sp - 1];
          if (next[v] < adj[v].length) {
            int w = adj[v][next[v]++];
            if (disc[w] < 0) {
              parent[w] = v;
              children[v]++;
              disc[w] = low[w] = time++;
              stack[sp++] = w;
            } else if (w != parent[v]) {
              low[v] = Math.min(low[v], disc[w]);
            }
          } else {
            sp--;
            int pv = parent[v];
            if (pv >= 0) {
              low[pv] = Math.min(low[pv], low[v]);
              if (parent[pv] >= 0 && low[v] >= disc[pv]) {
                art[pv] = true;
              }
            }
          }
        }
        art[root] = children[root] > 1;
      }
      return art;
    }

    private boolean isDataEdge(int u, int v) {
      for (TensorId t : g.op(v).inputs()) {
        if (t.op() == u) {
          return true;
        }
      }
      return false;
    }
  }
}
