package dev.lms4j.core.graph;

import java.util.Arrays;

/**
 * The order TensorFlow's executor runs a step in when most of its ops are chained by control
 * edges and a few are not (lms4j's serial order leaves out of its chain the ops TensorFlow fuses
 * or removes only where no control edge holds them). In the caller's thread the executor keeps
 * one queue of ready ops, first in, first out; when an op finishes, the ops it made ready join
 * the queue's end, those it feeds through data edges before those waiting on it through control
 * edges (the next op of the chain among them). So an op left out of the chain runs as soon as
 * its last input is there, ahead of the chain's next op, not at the place the levelled schedule
 * gives it.
 *
 * <p>Measured with TensorFlow's own log of the corpus DenseNet (the tflms plan for 46 MiB under
 * 30 MiB): a filter gradient left out of the chain ran right after its last input and freed an
 * 8 MiB swapped-in tensor before the next chained op asked for 8 MiB; at its level it ran after
 * that op, and the allocator model found no chunk for the request.
 *
 * <pre>{@code
 * int[] order = ExecutorOrder.of(g, Levels.of(g).schedule(), unchained);
 * }</pre>
 *
 * <p>With no op left out, the order is the chain itself.
 */
public final class ExecutorOrder {
  private ExecutorOrder() {}

  /**
   * The order the executor runs {@code g} in.
   *
   * @param g         the graph
   * @param chain     every op of {@code g}, in the chain's order (a topological order)
   * @param unchained by op id: true for the ops not in the chain (null or all false: the chain)
   * @return every op, in the order the executor runs them
   */
  public static int[] of(DataflowGraph g, int[] chain, boolean[] unchained) {
    return of(g, chain, unchained, null);
  }

  /**
   * As above; the ops {@code atOnce} marks (among the unchained) are not kernels of their own in
   * TensorFlow: identities grappler's pruner removes, shapes it folds, a bias add or activation
   * fused into the contraction before it. Their readers see the tensor as soon as the op before
   * them makes it, so they run, here, the moment they are ready, and what they make ready joins
   * the queue with what their producer made ready.
   *
   * @param atOnce by op id (null: none)
   */
  public static int[] of(DataflowGraph g, int[] chain, boolean[] unchained, boolean[] atOnce) {
    return of(g, chain, unchained, atOnce, false);
  }

  /**
   * As above; with {@code chainFirst}, where the chain's next op reads the op that finished
   * through a data edge, it becomes ready ahead of the other ops that op feeds. Which of those
   * the executor takes first is not fixed from one process to the next (it follows the order of
   * the graph grappler hands it): traced twice, the same rewritten DenseNet ran a filter
   * gradient left out of the chain ahead of the input gradient that followed in the chain once,
   * and after it once, and the allocator model needed 58 and 70 MiB for the two orders. So the
   * allocator check replays both.
   *
   * @param chainFirst the chain's next op first where it reads the finished op
   */
  public static int[] of(DataflowGraph g, int[] chain, boolean[] unchained, boolean[] atOnce,
      boolean chainFirst) {
    return of(g, chain, unchained, atOnce, null, chainFirst);
  }

  /**
   * As above; an op {@code pinned} marks (among the unchained) is run ahead of the chain's next
   * op in either order: {@code SerialOrder} gives that op a control edge from it (a filter
   * gradient oneDNN merges with its bias gradient takes one without losing the merge).
   *
   * @param pinned by op id (null: none)
   */
  public static int[] of(DataflowGraph g, int[] chain, boolean[] unchained, boolean[] atOnce,
      boolean[] pinned, boolean chainFirst) {
    int n = g.size();
    if (chain.length != n) {
      throw new IllegalArgumentException("the chain has " + chain.length + " ops, the graph " + n);
    }
    if (unchained == null || !any(unchained)) {
      return chain.clone();
    }
    return new Run(g, chain, unchained, atOnce, pinned, chainFirst).order();
  }

  /** One simulated run. */
  private static final class Run {
    private final DataflowGraph g;
    private final boolean[] atOnce;
    private final boolean chainFirst;
    private final boolean[] pinned;
    /** The chain's next op of each chained op, or -1. */
    private final int[] next;
    private final int[] pending;
    private final boolean[] control;
    private final int[] queue;
    private int tail;
    private final int[] out;
    private int k;

    Run(DataflowGraph g, int[] chain, boolean[] unchained, boolean[] atOnce, boolean[] pinned,
        boolean chainFirst) {
      this.g = g;
      this.chainFirst = chainFirst;
      this.pinned = pinned;
      int n = g.size();
      this.atOnce = new boolean[n];
      if (atOnce != null) {
        for (int v = 0; v < n; v++) {
          this.atOnce[v] = atOnce[v] && unchained[v];
        }
      }
      next = new int[n];
      int[] prev = new int[n];
      Arrays.fill(next, -1);
      Arrays.fill(prev, -1);
      int last = -1;
      for (int v : chain) {
        if (unchained[v]) {
          continue;
        }
        if (last >= 0) {
          next[last] = v;
          prev[v] = last;
        }
        last = v;
      }
      pending = new int[n];
      for (int v = 0; v < n; v++) {
        pending[v] = g.predecessorCount(v);
        if (prev[v] >= 0 && !isPredecessor(g, prev[v], v)) {
          pending[v]++;
        }
      }
      control = new boolean[n];
      queue = new int[n];
      out = new int[n];
      for (int v : chain) {
        if (pending[v] == 0) {
          ready(v);
        }
      }
    }

    int[] order() {
      int head = 0;
      while (head < tail) {
        int x = queue[head++];
        out[k++] = x;
        done(x);
      }
      if (k != out.length) {
        throw new IllegalStateException("the chain and the graph's edges close a cycle: "
            + (out.length - k) + " ops never became ready");
      }
      return out;
    }

    private void ready(int v) {
      if (atOnce[v]) {
        out[k++] = v;
        done(v);
      } else {
        queue[tail++] = v;
      }
    }

    /** Propagates {@code x}'s completion: data successors first, then control successors. */
    private void done(int x) {
      int[] controls = g.controlSuccessors(x);
      int nx = next[x];
      for (int s : controls) {
        control[s] = true;
      }
      if (nx >= 0) {
        control[nx] = true;
      }
      int[] succ = g.successors(x);
      // marks are read before ready() recurses (it sets its own)
      boolean[] viaControl = new boolean[succ.length];
      for (int i = 0; i < succ.length; i++) {
        viaControl[i] = control[succ[i]];
      }
      for (int s : controls) {
        control[s] = false;
      }
      if (nx >= 0) {
        control[nx] = false;
      }
      boolean nextFirst = chainFirst && nx >= 0 && isPredecessor(g, x, nx);
      int at = -1;
      if (nextFirst && --pending[nx] == 0) {
        at = tail;
        ready(nx);
      }
      for (int i = 0; i < succ.length; i++) {
        if (!viaControl[i] && --pending[succ[i]] == 0) {
          ready(succ[i]);
        }
      }
      for (int i = 0; i < succ.length; i++) {
        if (viaControl[i] && !(nextFirst && succ[i] == nx) && --pending[succ[i]] == 0) {
          ready(succ[i]);
        }
      }
      if (nx >= 0 && !isPredecessor(g, x, nx) && --pending[nx] == 0) {
        ready(nx);
      }
      if (at >= 0 && pinned != null) {
        // a pinned op this completion made ready runs ahead of the chain's next op
        int last = -1;
        for (int j = at + 1; j < tail; j++) {
          if (pinned[queue[j]]) {
            last = j;
          }
        }
        if (last > at) {
          System.arraycopy(queue, at + 1, queue, at, last - at);
          queue[last] = nx;
        }
      }
    }
  }

  private static boolean any(boolean[] a) {
    for (boolean b : a) {
      if (b) {
        return true;
      }
    }
    return false;
  }

  private static boolean isPredecessor(DataflowGraph g, int u, int v) {
    for (int i = 0, np = g.predecessorCount(v); i < np; i++) {
      if (g.predecessor(v, i) == u) {
        return true;
      }
    }
    return false;
  }
}
