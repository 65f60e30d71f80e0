package dev.lms4j.core.plan;

import dev.lms4j.core.memory.Tier;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

/**
 * TFLMS's parameters, with the same names and meanings (camel-cased). Build with
 * {@link #builder()}; every field has TFLMS's default.
 *
 * <pre>{@code
 * SwapParams p = SwapParams.builder().swapoutThreshold(10).swapinAhead(3).build();
 * }</pre>
 *
 * @param swapoutThreshold   a tensor is swapped out when a backward consumer is more than this
 *                           many levels after its producer; -1: auto-tune
 * @param swapinAhead        the swap-in starts (at least) this many levels before its consumer;
 *                           -1: auto-tune
 * @param swapinGroupby      consumers whose levels lie within this distance of the group's first
 *                           consumer share one swap-in; -1: auto-tune
 * @param syncMode           0 none; 1 forward consumers of a swapped tensor wait for its
 *                           swap-out; 2 a swap-in is triggered right before its consumer (no
 *                           prefetch); 3 both
 * @param serialization      level slices whose ops run one at a time, e.g. {@code ["1", "3:5",
 *                           "7:"]} (end exclusive as in Python, open ends allowed)
 * @param serializationBySize serialize every level whose outputs sum to more than this many GiB;
 *                           0: off
 * @param exclOutputByScopes ops under these name scopes never have their outputs swapped
 * @param exclOutputByTypes  ops of these types never have their outputs swapped
 * @param inclOutputByScopes when non-empty, only outputs of ops under these scopes are swapped
 * @param inclOutputByTypes  when non-empty, only outputs of ops of these types are swapped
 * @param exclInputByScopes  consumers under these scopes keep reading the original tensor
 * @param exclInputByTypes   consumers of these types keep reading the original tensor
 * @param inclInputByScopes  when non-empty, only consumers under these scopes get swap-ins
 * @param inclInputByTypes   when non-empty, only consumers of these types get swap-ins
 * @param tier               where swapped tensors go
 * @param batchSize          batch size substituted for the unknown first dimension; -1: infer
 * @param debug              log the plan in detail
 * @param debugLevel         1: per-tensor decisions; 2: also triggers and control edges
 */
public record SwapParams(int swapoutThreshold, int swapinAhead, int swapinGroupby, int syncMode,
    List<String> serialization, double serializationBySize,
    Set<String> exclOutputByScopes, Set<String> exclOutputByTypes,
    Set<String> inclOutputByScopes, Set<String> inclOutputByTypes,
    Set<String> exclInputByScopes, Set<String> exclInputByTypes,
    Set<String> inclInputByScopes, Set<String> inclInputByTypes,
    Tier tier, int batchSize, boolean debug, int debugLevel) {

  /** Op types whose outputs are never swapped, whatever the filters say (TFLMS's list). */
  public static final Set<String> BUILTIN_EXCLUDED_TYPES = Set.of("Const", "Identity",
      "Placeholder", "PlaceholderWithDefault", "VariableV2", "Variable", "VarHandleOp",
      "ReadVariableOp", "Shape", "ShapeN", "Size", "Rank", "NoOp");

  public SwapParams {
    if (swapoutThreshold < -1 || swapinAhead < -1 || swapinGroupby < -1) {
      throw new IllegalArgumentException("swapout_threshold, swapin_ahead and swapin_groupby "
          + "must be >= 0, or -1 for auto-tuning");
    }
    if (syncMode < 0 || syncMode > 3) {
      throw new IllegalArgumentException("sync_mode must be 0, 1, 2 or 3, not " + syncMode);
    }
    if (serializationBySize < 0) {
      throw new IllegalArgumentException("serialization_by_size must be >= 0 (GiB)");
    }
    if (batchSize == 0 || batchSize < -1) {
      throw new IllegalArgumentException("batch_size must be positive, or -1 to infer it");
    }
    serialization = List.copyOf(serialization);
    for (String s : serialization) {
      LevelSlice.parse(s);
    }
    exclOutputByScopes = sorted(exclOutputByScopes);
    exclOutputByTypes = sorted(exclOutputByTypes);
    inclOutputByScopes = sorted(inclOutputByScopes);
    inclOutputByTypes = sorted(inclOutputByTypes);
    exclInputByScopes = sorted(exclInputByScopes);
    exclInputByTypes = sorted(exclInputByTypes);
    inclInputByScopes = sorted(inclInputByScopes);
    inclInputByTypes = sorted(inclInputByTypes);
  }

  /** TFLMS's defaults: auto-tuning on, host tier. */
  public static SwapParams defaults() {
    return builder().build();
  }

  /** True when the three main parameters are all -1: the planner auto-tunes them. */
  public boolean autoTune() {
    return swapoutThreshold == -1 && swapinAhead == -1 && swapinGroupby == -1;
  }

  /** The parsed {@link #serialization} slices. */
  public List<LevelSlice> serializationSlices() {
    List<LevelSlice> out = new ArrayList<>();
    for (String s : serialization) {
      out.add(LevelSlice.parse(s));
    }
    return out;
  }

  /** A builder starting from these values. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.swapoutThreshold = swapoutThreshold;
    b.swapinAhead = swapinAhead;
    b.swapinGroupby = swapinGroupby;
    b.syncMode = syncMode;
    b.serialization = serialization;
    b.serializationBySize = serializationBySize;
    b.exclOutputByScopes = exclOutputByScopes;
    b.exclOutputByTypes = exclOutputByTypes;
    b.inclOutputByScopes = inclOutputByScopes;
    b.inclOutputByTypes = inclOutputByTypes;
    b.exclInputByScopes = exclInputByScopes;
    b.exclInputByTypes = exclInputByTypes;
    b.inclInputByScopes = inclInputByScopes;
    b.inclInputByTypes = inclInputByTypes;
    b.tier = tier;
    b.batchSize = batchSize;
    b.debug = debug;
    b.debugLevel = debugLevel;
    return b;
  }

  /** A new builder with TFLMS's defaults. */
  public static Builder builder() {
    return new Builder();
  }

  /** A short human-readable summary of the three main parameters and the sync mode. */
  public String summary() {
    return "swapout_threshold=" + swapoutThreshold + " swapin_ahead=" + swapinAhead
        + " swapin_groupby=" + swapinGroupby + " sync_mode=" + syncMode;
  }

  private static Set<String> sorted(Collection<String> c) {
    return java.util.Collections.unmodifiableSet(new TreeSet<>(c));
  }

  /** Builder for {@link SwapParams}. */
  public static final class Builder {
    private int swapoutThreshold = -1;
    private int swapinAhead = -1;
    private int swapinGroupby = -1;
    private int syncMode = 0;
    private List<String> serialization = List.of();
    private double serializationBySize = 0;
    private Set<String> exclOutputByScopes = Set.of();
    private Set<String> exclOutputByTypes = Set.of();
    private Set<String> inclOutputByScopes = Set.of();
    private Set<String> inclOutputByTypes = Set.of();
    private Set<String> exclInputByScopes = Set.of();
    private Set<String> exclInputByTypes = Set.of();
    private Set<String> inclInputByScopes = Set.of();
    private Set<String> inclInputByTypes = Set.of();
    private Tier tier = Tier.HOST;
    private int batchSize = -1;
    private boolean debug = false;
    private int debugLevel = 1;

    private Builder() {}

    /** See {@link SwapParams#swapoutThreshold()}. */
    public Builder swapoutThreshold(int v) {
      swapoutThreshold = v;
      return this;
    }

    /** See {@link SwapParams#swapinAhead()}. */
    public Builder swapinAhead(int v) {
      swapinAhead = v;
      return this;
    }

    /** See {@link SwapParams#swapinGroupby()}. */
    public Builder swapinGroupby(int v) {
      swapinGroupby = v;
      return this;
    }

    /** See {@link SwapParams#syncMode()}. */
    public Builder syncMode(int v) {
      syncMode = v;
      return this;
    }

    /** See {@link SwapParams#serialization()}. */
    public Builder serialization(List<String> v) {
      serialization = v;
      return this;
    }

    /** See {@link SwapParams#serializationBySize()}. */
    public Builder serializationBySize(double gib) {
      serializationBySize = gib;
      return this;
    }

    /** See {@link SwapParams#exclOutputByScopes()}. */
    public Builder exclOutputByScopes(Set<String> v) {
      exclOutputByScopes = v;
      return this;
    }

    /** See {@link SwapParams#exclOutputByTypes()}. */
    public Builder exclOutputByTypes(Set<String> v) {
      exclOutputByTypes = v;
      return this;
    }

    /** See {@link SwapParams#inclOutputByScopes()}. */
    public Builder inclOutputByScopes(Set<String> v) {
      inclOutputByScopes = v;
      return this;
    }

    /** See {@link SwapParams#inclOutputByTypes()}. */
    public Builder inclOutputByTypes(Set<String> v) {
      inclOutputByTypes = v;
      return this;
    }

    /** See {@link SwapParams#exclInputByScopes()}. */
    public Builder exclInputByScopes(Set<String> v) {
      exclInputByScopes = v;
      return this;
    }

    /** See {@link SwapParams#exclInputByTypes()}. */
    public Builder exclInputByTypes(Set<String> v) {
      exclInputByTypes = v;
      return this;
    }

    /** See {@link SwapParams#inclInputByScopes()}. */
    public Builder inclInputByScopes(Set<String> v) {
      inclInputByScopes = v;
      return this;
    }

    /** See {@link SwapParams#inclInputByTypes()}. */
    public Builder inclInputByTypes(Set<String> v) {
      inclInputByTypes = v;
      return this;
    }

    /** See {@link SwapParams#tier()}. */
    public Builder tier(Tier v) {
      tier = v;
      return this;
    }

    /** See {@link SwapParams#batchSize()}. */
    public Builder batchSize(int v) {
      batchSize = v;
      return this;
    }

    /** See {@link SwapParams#debug()}. */
    public Builder debug(boolean v) {
      debug = v;
      return this;
    }

    /** See {@link SwapParams#debugLevel()}. */
    public Builder debugLevel(int v) {
      debugLevel = v;
      return this;
    }

    /** The parameters; invalid values throw {@link IllegalArgumentException}. */
    public SwapParams build() {
      return new SwapParams(swapoutThreshold, swapinAhead, swapinGroupby, syncMode,
          serialization, serializationBySize, exclOutputByScopes, exclOutputByTypes,
          inclOutputByScopes, inclOutputByTypes, exclInputByScopes, exclInputByTypes,
          inclInputByScopes, inclInputByTypes, tier, batchSize, debug, debugLevel);
    }
  }
}
