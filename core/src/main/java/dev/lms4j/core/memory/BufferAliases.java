package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import java.util.Arrays;
import java.util.Objects;
import java.util.Set;

/**
 * Outputs that share an input's buffer instead of allocating their own. TensorFlow's kernels for
 * these ops hand the input's buffer on ({@code set_output(0, input)} or a reshaped view of it):
 * no bytes are allocated, and the input's buffer stays alive until the last reader of either
 * tensor is done. Grappler removes most of them before the step runs, with the same effect.
 *
 * <ul>
 *   <li>{@link #FORWARDING} ops: output 0 shares input 0 ({@code IdentityN}: output i shares
 *       input i);</li>
 *   <li>{@code Transpose} whose permutation is the identity (the kernel forwards 0-D, 1-D and
 *       identity transposes). The permutation is often computed in the graph (the gradient of
 *       {@code GatherV2} on axis 0 transposes by a permutation built from ranges), so it is
 *       inferred from the static shapes: input and output shapes equal and every dimension
 *       distinct leave only the identity. Repeated dimensions ({@code [64, 64]}) could hide a real
 *       transpose and are not taken as one.</li>
 *   <li>{@link #REDUCTIONS} whose output has as many bytes as their input: they reduce nothing
 *       (no axis, or axes of size 1), and the kernel hands the input's buffer on reshaped
 *       ({@code Tensor::CopyFrom} in TensorFlow's reduction op), as grappler does when it
 *       simplifies them. A gradient graph is full of them: the gradient of a broadcasting
 *       {@code Add} or {@code Mul} sums its incoming gradient over the axes
 *       {@code BroadcastGradientArgs} gives, none where both operands have one shape (the
 *       residual adds of a ResNet, the skip paths of a U-Net). Traced on the corpus ResNet's
 *       plan under 24 MiB: {@code gradients/Sum_1} of 2 MiB allocated nothing, where counting
 *       its output made the allocator model run out of memory.</li>
 * </ul>
 *
 * Never an alias: ops lms4j inserted (but the offload's {@code Reshape}s, which give a weight's
 * parse of its host copy a static shape and forward it as any Reshape does), an op on another
 * device than the input's producer (a copy between devices), and an output whose size differs
 * from the input's.
 */
public final class BufferAliases {
  private BufferAliases() {}

  /** Op types whose output 0 is input 0's buffer. */
  public static final Set<String> FORWARDING = Set.of("Identity", "StopGradient",
      "PreventGradient", "Reshape", "ExpandDims", "Squeeze", "EnsureShape", "IdentityN");

  private static final Set<String> TRANSPOSES = Set.of("Transpose", "ConjugateTranspose");

  /** Reductions whose kernel forwards its input when there is nothing to reduce. */
  public static final Set<String> REDUCTIONS = Set.of("Sum", "Mean", "Prod", "Max", "Min",
      "All", "Any", "EuclideanNorm");

  /** Element-wise kernels that reuse input 0's buffer for output 0 when they may. */
  private static final Set<String> IN_PLACE_FIRST = Set.of(
      // unary element-wise kernels
      "Abs", "Ceil", "Cos", "Elu", "Erf", "Exp", "Expm1", "Floor", "Inv", "LeakyRelu", "Log",
      "Log1p", "Neg", "Reciprocal", "Relu", "Relu6", "Round", "Rsqrt", "Selu", "Sigmoid", "Sign",
      "Sin", "Softplus", "Softsign", "Sqrt", "Square", "Tanh",
      // activation gradients: the incoming gradient's buffer only
      "EluGrad", "LeakyReluGrad", "Relu6Grad", "ReluGrad", "SeluGrad", "SoftplusGrad",
      "SoftsignGrad",
      "BiasAdd");

  /** Element-wise kernels that reuse input 0's or else input 1's buffer for output 0. */
  private static final Set<String> IN_PLACE_EITHER = Set.of("Add", "AddV2", "Sub", "Mul",
      "MulNoNan", "RealDiv", "Div", "DivNoNan", "Maximum", "Minimum", "SquaredDifference", "Pow",
      "TanhGrad", "SigmoidGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad");

  /**
   * Kernels that may take over input 0's buffer for output 0 besides the element-wise ones:
   * softmax ({@code forward_input_or_allocate_output} on the logits) and the max-pool gradient
   * (on the pooled op's input, which has the output's shape), seen reusing in traced steps.
   */
  private static final Set<String> IN_PLACE_FIRST_OTHER = Set.of("Softmax", "LogSoftmax",
      "MaxPoolGrad", "MaxPoolGradV2",
      // TensorFlow's ClipOp: forward_input_or_allocate_output({0}, 0, ...) (cwise_op_clip.cc)
      "ClipByValue");

  /** Kernels whose output 1 may take over input 0's buffer: the loss gradient takes the logits. */
  private static final Set<String> IN_PLACE_SECOND_FROM_FIRST = Set.of(
      "SoftmaxCrossEntropyWithLogits");

  /**
   * The inputs whose buffer output {@code output} of {@code op} may take over at run time, in
   * the order the kernel tries them; empty for outputs that are always allocated. TensorFlow's
   * kernels ({@code forward_input_or_allocate_output}) reuse an input's buffer when it has the
   * output's size and type and nothing else holds it: no other reader is pending, the op reads
   * it once, and it is no variable, constant or feed. Where the op is the buffer's only reader
   * that always holds ({@link InPlaceReuse}); where it is the last of several, it depends on the
   * order the step runs in, and {@link BufferRefs} decides it while the step is replayed.
   * {@code AddN} may reuse any of its inputs (the running accumulations of gradient sums,
   * {@code AddV2} chains, reuse the sum's buffer the same way);
   * {@code SoftmaxCrossEntropyWithLogits} writes its gradient (output 1) into the logits. Ops are
   * known by type, so lms4j's clones of recomputed ops reuse as their originals do, and its swap
   * ops never.
   */
  public static int[] inPlaceCandidates(Op op, int output) {
    if (output >= op.outputs().size()) {
      return NONE;
    }
    int n = op.inputs().size();
    String type = op.type();
    if (output == 1) {
      return IN_PLACE_SECOND_FROM_FIRST.contains(type) && n >= 1 ? FIRST : NONE;
    }
    if (output != 0) {
      return NONE;
    }
    if (IN_PLACE_FIRST.contains(type) || IN_PLACE_FIRST_OTHER.contains(type)) {
      return n >= 1 ? FIRST : NONE;
    }
    if (IN_PLACE_EITHER.contains(type)) {
      return n >= 2 ? EITHER : NONE;
    }
    if (type.equals("AddN") || type.equals("AccumulateNV2")) {
      int[] all = new int[n];
      for (int i = 0; i < n; i++) {
        all[i] = i;
      }
      return all;
    }
    return NONE;
  }

  private static final int[] NONE = {};
  private static final int[] FIRST = {0};
  private static final int[] EITHER = {0, 1};
  /** The key of {@link #owners} among a graph's derived values. */
  private static final Object OWNERS = new Object();

  /**
   * The input of {@code op} whose buffer its output {@code output} shares, or null when the
   * output has a buffer of its own.
   */
  public static TensorId source(DataflowGraph g, Op op, int output) {
    // lms4j's own ops are no aliases (swap-ins copy), but for the Reshapes of the offload: they
    // give a weight's parse of its host copy a static shape, and TensorFlow's Reshape forwards
    // the buffer (traced on the corpus U-Net with weights on the host: the parse allocates, the
    // reshape nothing)
    boolean offloadReshape = op.type().equals("Reshape")
        && op.name().startsWith(OpTypes.OFFLOAD_PREFIX);
    if (op.name().startsWith(OpTypes.LMS_PREFIX) && !offloadReshape || op.inputs().isEmpty()) {
      return null;
    }
    int input;
    if (op.type().equals("IdentityN")) {
      input = output;
    } else if (output == 0 && (FORWARDING.contains(op.type())
        || TRANSPOSES.contains(op.type()) && identityPermutation(g, op)
        || REDUCTIONS.contains(op.type()) && reducesNothing(g, op))) {
      input = 0;
    } else {
      return null;
    }
    if (input >= op.inputs().size()) {
      return null;
    }
    TensorId src = op.inputs().get(input);
    Tensor in = g.tensor(src);
    Tensor out = op.output(output);
    if (in.bytes() != out.bytes() || !Objects.equals(g.op(src.op()).device(), op.device())) {
      return null;
    }
    return src;
  }

  /** A reduction whose output, of known size, is as large as its input: nothing reduced. */
  private static boolean reducesNothing(DataflowGraph g, Op op) {
    long in = g.tensor(op.inputs().get(0)).bytes();
    return in > 0 && in == op.output(0).bytes();
  }

  private static boolean identityPermutation(DataflowGraph g, Op op) {
    long[] in = g.tensor(op.inputs().get(0)).shape();
    long[] out = op.output(0).shape();
    if (!Arrays.equals(in, out)) {
      return false;
    }
    if (in.length <= 1) {
      return true;
    }
    long[] sorted = in.clone();
    Arrays.sort(sorted);
    for (int i = 0; i < sorted.length; i++) {
      if (sorted[i] < 0 || i > 0 && sorted[i] == sorted[i - 1]) {
        return false;
      }
    }
    return true;
  }

  /**
   * For every op and output, the tensor that owns its buffer: itself, the owner of the input it
   * shares (followed through chains of aliases), or the owner of the input buffer it takes over
   * in place as that buffer's only reader ({@link InPlaceReuse}; on graphs whose kernels do,
   * {@link DataflowGraph#inPlaceReuse()}). Indexed {@code [op id][output]}. Computed once per
   * graph ({@link DataflowGraph#derived}) and shared: callers must not modify it.
   */
  public static TensorId[][] owners(DataflowGraph g) {
    return g.derived(OWNERS, BufferAliases::computeOwners);
  }

  private static TensorId[][] computeOwners(DataflowGraph g) {
    TensorId[][] fwd = forwardingOwners(g);
    if (!g.inPlaceReuse()) {
      return fwd;
    }
    int n = g.size();
    int[] first = new int[n + 1];
    for (int v = 0; v < n; v++) {
      first[v + 1] = first[v] + g.op(v).outputs().size();
    }
    int tensors = first[n];
    int[][] in = new int[n][];
    int[][][] cand = new int[n][][];
    boolean[] shapeOnly = new boolean[n];
    long[] bytes = new long[tensors];
    String[] dtype = new String[tensors];
    int[] owner = new int[tensors];
    int[] reads = new int[tensors];
    // a constant grappler folds into stays held by its kernel: no op takes its buffer over
    boolean[] held = BfcReplay.heldAtRun(g);
    for (Op op : g.ops()) {
      int v = op.id();
      boolean pinned = MemorySimulator.isPinned(op) || held[v];
      cand[v] = new int[op.outputs().size()][];
      for (int i = 0; i < op.outputs().size(); i++) {
        int t = first[v] + i;
        Tensor out = op.output(i);
        bytes[t] = out.bytes();
        dtype[t] = String.valueOf(out.dtype());
        TensorId o = fwd[v][i];
        owner[t] = first[o.op()] + o.output();
        reads[t] = pinned || out.persistent() ? InPlaceReuse.RESIDENT
            : owner[t] != t ? InPlaceReuse.ALIAS : 0;
        cand[v][i] = inPlaceCandidates(op, i);
      }
      shapeOnly[v] = OpTypes.SHAPE_ONLY.contains(op.type());
      in[v] = new int[op.inputs().size()];
      for (int k = 0; k < in[v].length; k++) {
        TensorId x = op.inputs().get(k);
        in[v][k] = first[x.op()] + x.output();
      }
    }
    for (int v = 0; v < n; v++) {
      if (!shapeOnly[v]) {
        for (int x : in[v]) {
          if (reads[owner[x]] >= 0) {
            reads[owner[x]]++;
          }
        }
      }
    }
    // the session's hold on a fetched tensor: its only reader does not take its buffer over
    for (TensorId t : g.fetched()) {
      int x = first[t.op()] + t.output();
      if (reads[owner[x]] >= 0) {
        reads[owner[x]]++;
      }
    }
    InPlaceReuse.Step step = new InPlaceReuse.Step(in, first, cand, shapeOnly, bytes, dtype);
    if (InPlaceReuse.apply(step, g.topologicalOrder(), owner, reads) == 0) {
      return fwd;
    }
    TensorId[][] out = new TensorId[n][];
    int[] opOf = new int[tensors];
    for (int v = 0; v < n; v++) {
      for (int t = first[v]; t < first[v + 1]; t++) {
        opOf[t] = v;
      }
    }
    for (int v = 0; v < n; v++) {
      out[v] = new TensorId[first[v + 1] - first[v]];
      for (int i = 0; i < out[v].length; i++) {
        int o = owner[first[v] + i];
        out[v][i] = o == first[v] + i ? fwd[v][i] : new TensorId(opOf[o], o - first[opOf[o]]);
      }
    }
    return out;
  }

  /**
   * For every op and output, the tensor that owns its buffer through forwarding ops only
   * ({@link #FORWARDING}, identity transposes): {@link #owners} without in-place reuse.
   */
  public static TensorId[][] forwardingOwners(DataflowGraph g) {
    TensorId[][] owner = new TensorId[g.size()][];
    for (Op op : g.ops()) {
      owner[op.id()] = new TensorId[op.outputs().size()];
    }
    for (Op op : g.ops()) {
      for (int i = 0; i < op.outputs().size(); i++) {
        resolve(g, owner, op.id(), i);
      }
    }
    return owner;
  }

  private static TensorId resolve(DataflowGraph g, TensorId[][] owner, int v, int i) {
    // iterative: alias chains (Identity of Reshape of ...) can be long in unrolled graphs
    int op = v;
    int out = i;
    int hops = 0;
    TensorId found = null;
    while (found == null) {
      if (owner[op][out] != null) {
        found = owner[op][out];
      } else {
        TensorId src = source(g, g.op(op), out);
        if (src == null || ++hops > g.size()) {
          found = new TensorId(op, out);
        } else {
          op = src.op();
          out = src.output();
        }
      }
    }
    // path compression: every tensor on the chain gets the owner
    op = v;
    out = i;
    while (owner[op][out] == null) {
      owner[op][out] = found;
      TensorId src = source(g, g.op(op), out);
      if (src == null) {
        break;
      }
      op = src.op();
      out = src.output();
    }
    return found;
  }
}
