package dev.lms4j.core.graph;

import java.util.Set;

/** Facts about op types that planners and the simulator need. */
public final class OpTypes {
  private OpTypes() {}

  /** Ops that only read their input's shape: they do not keep the input's buffer alive. */
  public static final Set<String> SHAPE_ONLY =
      Set.of("Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike", "BroadcastGradientArgs");

  /** Variable ops: their outputs are persistent. */
  public static final Set<String> VARIABLES =
      Set.of("VariableV2", "Variable", "VarHandleOp", "TemporaryVariable");

  /** Ops whose outputs are constants held by the kernel (allocated once, not per step). */
  public static final Set<String> CONSTANTS = Set.of("Const", "HostConst");

  /** Feed ops: their buffers are allocated by the caller for the whole step. */
  public static final Set<String> FEEDS = Set.of("Placeholder", "PlaceholderWithDefault");

  /**
   * The training batch norms whose kernels TensorFlow's remapper fuses with an activation and
   * oneDNN's rewrite takes over (their gradients are not in it).
   */
  public static final Set<String> BATCH_NORMS = Set.of("FusedBatchNorm", "FusedBatchNormV2",
      "FusedBatchNormV3");

  /** Op type of a swap-out inserted by lms4j (in the graph model). */
  public static final String SWAP_OUT = "_LmsSwapOut";

  /** Op type of a swap-in inserted by lms4j (in the graph model). */
  public static final String SWAP_IN = "_LmsSwapIn";

  /** Name prefix of every op lms4j inserts; a graph holding such ops was already rewritten. */
  public static final String LMS_PREFIX = "lms4j/";

  /** Name prefix of the ops that keep optimizer slots and weights on the host (SlotOffload). */
  public static final String OFFLOAD_PREFIX = LMS_PREFIX + "offload/";

  /** True for op types whose outputs are resident for a whole step (constants, feeds, variables). */
  public static boolean isResident(String type) {
    return CONSTANTS.contains(type) || FEEDS.contains(type) || VARIABLES.contains(type);
  }

  /** True for random or stateful op types (never recomputed, never duplicated). */
  public static boolean isRandomOrStateful(String type) {
    return type.startsWith("Random") || type.startsWith("Stateful") || type.contains("Truncated")
        || type.startsWith("Multinomial") || type.startsWith("Assign") || type.startsWith("Apply")
        || type.startsWith("ResourceApply") || VARIABLES.contains(type);
  }

  /**
   * True for op types that update a variable in place (optimizer updates, assignments,
   * scatters): a read of the variable that runs after one sees the new value.
   */
  public static boolean isVariableWriter(String type) {
    return type.startsWith("Apply") || type.startsWith("ResourceApply")
        || type.startsWith("SparseApply") || type.startsWith("ResourceSparseApply")
        || type.startsWith("Assign") || type.startsWith("Scatter")
        || type.startsWith("ResourceScatter");
  }

  /** Aggregates whose data inputs grappler sorts by name (commutative ops, n-ary). */
  public static final Set<String> ORDER_SENSITIVE = Set.of("AddN", "AccumulateNV2");

  /**
   * True for an n-ary sum of three or more inputs. Grappler's arithmetic optimizer sorts the
   * data inputs of commutative ops by name before it runs, and a float sum of three or more
   * terms depends on their order: re-pointing one input of such an op to a swap-in or a clone
   * (another name) moves it in that order and changes the rounding (measured: one input of a
   * five-input gradient {@code AddN} in GPT-2 swapped moved the second loss by one ulp;
   * bit-identical with the arithmetic optimizer off). Two-input sums and products are exactly
   * commutative and are not affected.
   */
  public static boolean orderSensitive(Op op) {
    return ORDER_SENSITIVE.contains(op.type()) && op.inputs().size() >= 3;
  }
}
