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
 * </ul>
 *
 * Never an alias: ops lms4j inserted, an op on another device than the input's producer (a copy
 * between devices), and an output whose size differs from the input's.
 */
public final class BufferAliases {
  private BufferAliases() {}

  /** Op types whose output 0 is input 0's buffer. */
  public static final Set<String> FORWARDING = Set.of("Identity", "StopGradient",
      "PreventGradient", "Reshape", "ExpandDims", "Squeeze", "EnsureShape", "IdentityN");

  private static final Set<String> TRANSPOSES = Set.of("Transpose", "ConjugateTranspose");

  /**
   * The input of {@code op} whose buffer its output {@code output} shares, or null when the
   * output has a buffer of its own.
   */
  public static TensorId source(DataflowGraph g, Op op, int output) {
    if (op.name().startsWith(OpTypes.LMS_PREFIX) || op.inputs().isEmpty()) {
      return null;
    }
    int input;
    if (op.type().equals("IdentityN")) {
      input = output;
    } else if (output == 0 && (FORWARDING.contains(op.type())
        || TRANSPOSES.contains(op.type()) && identityPermutation(g, op))) {
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
   * For every op and output, the tensor that owns its buffer: itself, or the owner of the input
   * it shares (followed through chains of aliases). Indexed {@code [op id][output]}.
   */
  public static TensorId[][] owners(DataflowGraph g) {
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
