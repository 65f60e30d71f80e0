package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.Collections;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * What may happen to each tensor of a graph: the one place that decides what may be swapped or
 * recomputed, in the spirit of PyTorch's {@code CheckpointPolicy}. Built once from the built-in
 * exclusions (dtypes, op types, random and stateful ops, parameters), the TFLMS include/exclude
 * filters, the ops to recompute ({@code _recompute_hint}, {@code --recompute}) and the inputs to
 * swap ({@code _swap_to_host}); every planner reads only it, so user constraints hold in every
 * mode. Queries look at an op itself, so they also answer for graphs derived from the planned one
 * (with recompute clones or swap ops added).
 *
 * <pre>{@code
 * TensorPolicy p = TensorPolicy.of(graph, TensorPolicy.Spec.from(swapParams)
 *     .withRecompute(Set.of("relu1")));
 * if (p.maySwap(graph, tensor)) { ... }
 * }</pre>
 */
public final class TensorPolicy {
  /** Dtypes whose tensors are never swapped (their payload is not a plain buffer). */
  public static final Set<String> NEVER_SWAP_DTYPES = Set.of("string", "resource", "variant");

  /** What a tensor may become, as reports and tests show it. */
  public enum Kind {
    /** Neither swapped nor recomputed. */
    MUST_KEEP,
    /** Allowed, but smaller than the planners' minimum size: kept unless nothing else fits. */
    PREFER_KEEP,
    /** May be swapped out and back in. */
    MAY_SWAP,
    /** Its producer may be recomputed in the backward pass. */
    MAY_RECOMPUTE,
    /** Its producer is recomputed in every mode (a hint or a named op). */
    MUST_RECOMPUTE,
    /** Swapped out and back in for the named consumers in every mode ({@code _swap_to_host}). */
    MUST_SWAP
  }

  /**
   * The user's constraints.
   *
   * @param exclOutputScopes ops under these name scopes never have their outputs swapped
   * @param exclOutputTypes  ops of these types never have their outputs swapped
   * @param inclOutputScopes when non-empty (with the types), only outputs of these scopes swap
   * @param inclOutputTypes  when non-empty (with the scopes), only outputs of these types swap
   * @param exclInputScopes  consumers under these scopes keep reading the original tensor
   * @param exclInputTypes   consumers of these types keep reading the original tensor
   * @param inclInputScopes  when non-empty (with the types), only these consumers get swap-ins
   * @param inclInputTypes   when non-empty (with the scopes), only these consumers get swap-ins
   * @param recompute        forward ops recomputed in every mode
   * @param swapToHost       consumer op name -> indices of its inputs swapped in every mode
   * @param minBytes         tensors smaller than this are {@link Kind#PREFER_KEEP}
   */
  public record Spec(Set<String> exclOutputScopes, Set<String> exclOutputTypes,
      Set<String> inclOutputScopes, Set<String> inclOutputTypes,
      Set<String> exclInputScopes, Set<String> exclInputTypes,
      Set<String> inclInputScopes, Set<String> inclInputTypes,
      Set<String> recompute, Map<String, Set<Integer>> swapToHost, long minBytes) {

    public Spec {
      exclOutputScopes = sorted(exclOutputScopes);
      exclOutputTypes = sorted(exclOutputTypes);
      inclOutputScopes = sorted(inclOutputScopes);
      inclOutputTypes = sorted(inclOutputTypes);
      exclInputScopes = sorted(exclInputScopes);
      exclInputTypes = sorted(exclInputTypes);
      inclInputScopes = sorted(inclInputScopes);
      inclInputTypes = sorted(inclInputTypes);
      recompute = sorted(recompute);
      SortedMap<String, Set<Integer>> s = new TreeMap<>();
      swapToHost.forEach((k, v) -> s.put(k, sorted(v)));
      swapToHost = Collections.unmodifiableSortedMap(s);
      if (minBytes < 0) {
        throw new IllegalArgumentException("minimum size must be >= 0 bytes");
      }
    }

    /** No user constraints: the built-in exclusions only. */
    public static Spec builtin() {
      return new Spec(Set.of(), Set.of(), Set.of(), Set.of(), Set.of(), Set.of(), Set.of(),
          Set.of(), Set.of(), Map.of(), 0);
    }

    /** The eight TFLMS include/exclude filters of {@code p}. */
    public static Spec from(SwapParams p) {
      return new Spec(p.exclOutputByScopes(), p.exclOutputByTypes(), p.inclOutputByScopes(),
          p.inclOutputByTypes(), p.exclInputByScopes(), p.exclInputByTypes(),
          p.inclInputByScopes(), p.inclInputByTypes(), Set.of(), Map.of(), 0);
    }

    /** These ops are recomputed in every mode (added to those already named). */
    public Spec withRecompute(Set<String> ops) {
      Set<String> all = new TreeSet<>(recompute);
      all.addAll(ops);
      return new Spec(exclOutputScopes, exclOutputTypes, inclOutputScopes, inclOutputTypes,
          exclInputScopes, exclInputTypes, inclInputScopes, inclInputTypes, all, swapToHost,
          minBytes);
    }

    /** These inputs (consumer -> input indices) are swapped in every mode. */
    public Spec withSwapToHost(Map<String, Set<Integer>> inputs) {
      Map<String, Set<Integer>> all = new TreeMap<>(swapToHost);
      inputs.forEach((k, v) -> all.merge(k, v, (a, b) -> {
        Set<Integer> u = new TreeSet<>(a);
        u.addAll(b);
        return u;
      }));
      return new Spec(exclOutputScopes, exclOutputTypes, inclOutputScopes, inclOutputTypes,
          exclInputScopes, exclInputTypes, inclInputScopes, inclInputTypes, recompute, all,
          minBytes);
    }

    /** Tensors smaller than this are preferably kept. */
    public Spec withMinBytes(long bytes) {
      return new Spec(exclOutputScopes, exclOutputTypes, inclOutputScopes, inclOutputTypes,
          exclInputScopes, exclInputTypes, inclInputScopes, inclInputTypes, recompute,
          swapToHost, bytes);
    }

    private static <T extends Comparable<T>> Set<T> sorted(Set<T> s) {
      return Collections.unmodifiableSortedSet(new TreeSet<>(s));
    }
  }

  /**
   * One input that must be swapped: the tensor and the consumers that read its swap-in.
   *
   * @param tensor    the tensor
   * @param consumers ids of the consumers, ascending
   */
  public record ForcedSwap(TensorId tensor, List<Integer> consumers) {
    public ForcedSwap {
      consumers = List.copyOf(consumers);
    }
  }

  private final Spec spec;
  private final SortedSet<String> mustRecompute;
  private final List<ForcedSwap> mustSwap;

  private TensorPolicy(Spec spec, SortedSet<String> mustRecompute, List<ForcedSwap> mustSwap) {
    this.spec = spec;
    this.mustRecompute = Collections.unmodifiableSortedSet(mustRecompute);
    this.mustSwap = List.copyOf(mustSwap);
  }

  /** The built-in exclusions only. */
  public static TensorPolicy builtin(DataflowGraph g) {
    return of(g, Spec.builtin());
  }

  /**
   * The policy of {@code g} under {@code spec}. Named ops the graph does not hold (a step does
   * not run them) are left out.
   *
   * @throws IllegalArgumentException when a named op cannot be recomputed, or a named input
   *                                  does not exist or cannot be swapped
   */
  public static TensorPolicy of(DataflowGraph g, Spec spec) {
    SortedSet<String> rec = new TreeSet<>();
    for (String name : spec.recompute()) {
      Op op = g.op(name).orElse(null);
      if (op == null) {
        continue;
      }
      if (!recomputable(op)) {
        throw new IllegalArgumentException(name + " (" + op.type() + ") cannot be recomputed: "
            + "random, stateful, fed, variable, constant, an n-ary sum (AddN of 3 or more) or "
            + "not in the forward pass");
      }
      rec.add(name);
    }
    Map<TensorId, SortedSet<Integer>> forced = new TreeMap<>();
    for (Map.Entry<String, Set<Integer>> e : spec.swapToHost().entrySet()) {
      Op consumer = g.op(e.getKey()).orElse(null);
      if (consumer == null) {
        continue;
      }
      for (int i : e.getValue()) {
        if (i < 0 || i >= consumer.inputs().size()) {
          throw new IllegalArgumentException("_swap_to_host of " + consumer.name() + ": it has "
              + consumer.inputs().size() + " inputs, no input " + i);
        }
        TensorId t = consumer.inputs().get(i);
        if (!builtinSwappable(g, t)) {
          throw new IllegalArgumentException("_swap_to_host of " + consumer.name() + ": input "
              + i + " (" + g.tensorName(t) + ", " + g.tensor(t).dtype() + ") cannot be swapped: "
              + "a parameter, constant, resource, string or empty tensor");
        }
        forced.computeIfAbsent(t, k -> new TreeSet<>()).add(consumer.id());
      }
    }
    List<ForcedSwap> swaps = new java.util.ArrayList<>();
    forced.forEach((t, cs) -> swaps.add(new ForcedSwap(t, List.copyOf(cs))));
    return new TensorPolicy(spec, rec, swaps);
  }

  /** The constraints this policy was built from. */
  public Spec spec() {
    return spec;
  }

  /** Names of the ops recomputed in every mode, sorted. */
  public SortedSet<String> mustRecompute() {
    return mustRecompute;
  }

  /** The inputs swapped in every mode, by tensor. */
  public List<ForcedSwap> mustSwap() {
    return mustSwap;
  }

  /** True when some decision is forced (recompute or swap in every mode). */
  public boolean forcesDecisions() {
    return !mustRecompute.isEmpty() || !mustSwap.isEmpty();
  }

  /** True when the user restricted which tensors or consumers may swap. */
  public boolean filtersSwaps() {
    return !spec.exclOutputScopes().isEmpty() || !spec.exclOutputTypes().isEmpty()
        || !spec.inclOutputScopes().isEmpty() || !spec.inclOutputTypes().isEmpty()
        || !spec.exclInputScopes().isEmpty() || !spec.exclInputTypes().isEmpty()
        || !spec.inclInputScopes().isEmpty() || !spec.inclInputTypes().isEmpty();
  }

  /** True when {@code op} may be recomputed in the backward pass. */
  public boolean mayRecompute(Op op) {
    return recomputable(op);
  }

  /** True when {@code op} is recomputed in every mode. */
  public boolean mustRecompute(Op op) {
    return mustRecompute.contains(op.name());
  }

  /**
   * True when tensor {@code t} of {@code g} may be swapped out: the built-in rules (not a
   * parameter, not empty, a swappable dtype, rank at least 1, made by an op whose type is not
   * excluded) and the user's output filters; or the user forced it.
   */
  public boolean maySwap(DataflowGraph g, TensorId t) {
    if (mustSwap(t)) {
      return true;
    }
    return builtinSwappable(g, t) && outputAllowed(g.op(t.op()));
  }

  /** True when {@code t} is swapped for some consumer in every mode. */
  public boolean mustSwap(TensorId t) {
    for (ForcedSwap f : mustSwap) {
      if (f.tensor().equals(t)) {
        return true;
      }
    }
    return false;
  }

  /**
   * True when {@code consumer} may read a swap-in instead of the original tensor: not a swap op
   * or an excluded type, and allowed by the user's input filters. Recompute clones may.
   */
  public boolean maySwapInto(Op consumer) {
    if (excludedType(consumer)) {
      return false;
    }
    return filtered(consumer, spec.inclInputScopes(), spec.inclInputTypes(),
        spec.exclInputScopes(), spec.exclInputTypes());
  }

  /** True when a tensor this small is preferably kept. */
  public boolean preferKeep(Tensor t) {
    return t.bytes() < spec.minBytes();
  }

  /** What tensor {@code t} may become, for reports and tests. */
  public Set<Kind> kinds(DataflowGraph g, TensorId t) {
    Set<Kind> out = EnumSet.noneOf(Kind.class);
    Op prod = g.op(t.op());
    if (mustSwap(t)) {
      out.add(Kind.MUST_SWAP);
    }
    if (mustRecompute(prod)) {
      out.add(Kind.MUST_RECOMPUTE);
    }
    if (maySwap(g, t)) {
      out.add(Kind.MAY_SWAP);
    }
    if (mayRecompute(prod) && !g.tensor(t).persistent()) {
      out.add(Kind.MAY_RECOMPUTE);
    }
    if (out.isEmpty()) {
      out.add(Kind.MUST_KEEP);
    } else if (preferKeep(g.tensor(t)) && !out.contains(Kind.MUST_SWAP)
        && !out.contains(Kind.MUST_RECOMPUTE)) {
      out.add(Kind.PREFER_KEEP);
    }
    return out;
  }

  /** How many tensors of {@code g} have each kind, for logs and reports. */
  public Map<Kind, Integer> census(DataflowGraph g) {
    Map<Kind, Integer> n = new LinkedHashMap<>();
    for (Kind k : Kind.values()) {
      n.put(k, 0);
    }
    for (Op op : g.ops()) {
      for (int i = 0; i < op.outputs().size(); i++) {
        for (Kind k : kinds(g, new TensorId(op.id(), i))) {
          n.merge(k, 1, Integer::sum);
        }
      }
    }
    return n;
  }

  /** True when an op may be recomputed at all, whatever the user said (the built-in rules). */
  static boolean recomputable(Op op) {
    if (op.category() != OpCategory.FORWARD || OpTypes.isRandomOrStateful(op.type())
        || MemorySimulator.isPinned(op) || op.name().startsWith(OpTypes.LMS_PREFIX)
        || op.outputs().isEmpty() || OpTypes.orderSensitive(op)) {
      return false;
    }
    for (Tensor t : op.outputs()) {
      if (t.persistent()) {
        return false;
      }
    }
    return true;
  }

  private static boolean builtinSwappable(DataflowGraph g, TensorId t) {
    Tensor tensor = g.tensor(t);
    Op prod = g.op(t.op());
    return !tensor.persistent() && tensor.bytes() > 0 && tensor.rank() >= 1
        && !NEVER_SWAP_DTYPES.contains(tensor.dtype()) && !excludedType(prod)
        && !prod.name().startsWith(OpTypes.LMS_PREFIX);
  }

  private boolean outputAllowed(Op prod) {
    return filtered(prod, spec.inclOutputScopes(), spec.inclOutputTypes(),
        spec.exclOutputScopes(), spec.exclOutputTypes());
  }

  static boolean excludedType(Op op) {
    return SwapParams.BUILTIN_EXCLUDED_TYPES.contains(op.type()) || MemorySimulator.isPinned(op);
  }

  private static boolean filtered(Op op, Set<String> inclScopes, Set<String> inclTypes,
      Set<String> exclScopes, Set<String> exclTypes) {
    if (!inclScopes.isEmpty() || !inclTypes.isEmpty()) {
      if (!inScopes(op, inclScopes) && !inclTypes.contains(op.type())) {
        return false;
      }
    }
    return !inScopes(op, exclScopes) && !exclTypes.contains(op.type());
  }

  private static boolean inScopes(Op op, Set<String> scopes) {
    for (String s : scopes) {
      if (op.name().startsWith(s)) {
        return true;
      }
    }
    return false;
  }
}
