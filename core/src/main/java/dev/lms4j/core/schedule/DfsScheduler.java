package dev.lms4j.core.schedule;

import dev.lms4j.core.graph.DataflowGraph;
import java.util.Arrays;
import java.util.Comparator;

/**
 * XLA's DFS scheduler ({@code DFSMemoryScheduler}): a depth-first post-order from the sinks that
 * visits first the input with the most extra users, then the one with the largest subtree, then
 * by name. An op's extra users are its successors minus one plus its inputs' extra users; its
 * subtree size is the bytes it allocates plus its inputs' subtree sizes. Both are summed over a
 * DAG, so shared ancestors count more than once; as in XLA they are capped (extra users at the
 * number of ops, sizes at the bytes allocated so far) so they cannot overflow. Visiting the heavy
 * subtree first finishes it while the light ones have allocated nothing yet.
 *
 * <pre>{@code
 * int[] order = DfsScheduler.schedule(graph);
 * long peak = MemorySimulator.simulate(graph, order).peakBytes();
 * }</pre>
 *
 * O(ops + edges log edges).
 */
public final class DfsScheduler {
  private DfsScheduler() {}

  /** The DFS schedule of {@code g}: a topological order of its op ids. */
  public static int[] schedule(DataflowGraph g) {
    return schedule(ScheduleGraph.of(g));
  }

  static int[] schedule(ScheduleGraph sg) {
    int n = sg.n;
    long[] extraUsers = new long[n];
    long[] totalSizes = new long[n];
    long cumulative = 0;
    for (int v : sg.levelled) { // a topological order of the graph with its hazards
      extraUsers[v] = Math.max(0, sg.succs[v].length - 1);
      totalSizes[v] = sg.alloc[v];
      cumulative += sg.alloc[v];
      for (int p : sg.preds[v]) {
        extraUsers[v] += extraUsers[p];
        totalSizes[v] += totalSizes[p];
      }
      extraUsers[v] = Math.min(extraUsers[v], n);
      totalSizes[v] = Math.min(totalSizes[v], cumulative);
    }
    Comparator<Integer> first = Comparator
        .<Integer>comparingLong(v -> -extraUsers[v])
        .thenComparingLong(v -> -totalSizes[v])
        .thenComparing(v -> sg.g.op(v).name());
    int[][] children = new int[n][];
    for (int v = 0; v < n; v++) {
      children[v] = sorted(sg.preds[v], first);
    }
    return PostOrderScheduler.postOrder(n, children, sorted(PostOrderScheduler.sinks(sg), first));
  }

  private static int[] sorted(int[] ids, Comparator<Integer> c) {
    if (ids.length < 2) {
      return ids;
    }
    Integer[] boxed = Arrays.stream(ids).boxed().toArray(Integer[]::new);
    Arrays.sort(boxed, c);
    return Arrays.stream(boxed).mapToInt(Integer::intValue).toArray();
  }
}
