package dev.lms4j.core.schedule;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import java.util.Arrays;
import java.util.PriorityQueue;

/**
 * XLA's memory-aware list scheduler ({@code ListScheduler}): a greedy topological sort that
 * always runs, among the ready ops, the one that frees the most memory net of what it
 * allocates: {@code bytes freed - bytes allocated}, where an input is freed when the op is its
 * last unscheduled (non shape-only) reader and the bytes allocated are its transient outputs.
 * Ties go to the op that comes first in the levelled schedule, so where memory does not decide,
 * the order is TensorFlow's and no control edge is needed to enforce it.
 *
 * <pre>{@code
 * int[] order = ListScheduler.schedule(graph);
 * long peak = MemorySimulator.simulate(graph, order).peakBytes();
 * }</pre>
 *
 * When a tensor is left with a single unscheduled reader, that reader's priority rises at once
 * (XLA updates the ready queue the same way), through a lazily invalidated heap:
 * O((ops + edges) log ops).
 */
public final class ListScheduler {
  private ListScheduler() {}

  /** The list schedule of {@code g}: a topological order of its op ids. */
  public static int[] schedule(DataflowGraph g) {
    return schedule(ScheduleGraph.of(g));
  }

  static int[] schedule(ScheduleGraph sg) {
    return new Run(sg).run();
  }

  /** One scheduling run; tensors are numbered op by op, output by output. */
  private static final class Run {
    private record Entry(long priority, int rank, int op, int stamp) {}

    private final ScheduleGraph sg;
    private final int n;
    private final int[] base;
    private final long[] bytes;
    /** Distinct unscheduled readers (non shape-only) of each transient tensor. */
    private final int[] remainingReaders;
    /** Distinct readers of each transient tensor. */
    private final int[][] readers;
    /** Distinct transient tensors each op reads (none for shape-only ops). */
    private final int[][] reads;
    private final long[] freed;
    private final int[] stamp;
    private final boolean[] ready;
    private final boolean[] done;
    private final PriorityQueue<Entry> heap = new PriorityQueue<>((a, b) ->
        a.priority != b.priority ? Long.compare(b.priority, a.priority)
            : Integer.compare(a.rank, b.rank));

    Run(ScheduleGraph sg) {
      this.sg = sg;
      n = sg.n;
      DataflowGraph g = sg.g;
      base = new int[n + 1];
      for (int v = 0; v < n; v++) {
        base[v + 1] = base[v] + g.op(v).outputs().size();
      }
      int tensors = base[n];
      bytes = new long[tensors];
      boolean[] trans = new boolean[tensors];
      for (int v = 0; v < n; v++) {
        Op op = g.op(v);
        for (int i = 0; i < op.outputs().size(); i++) {
          trans[base[v] + i] = sg.transientOutput(new TensorId(v, i));
          bytes[base[v] + i] = op.output(i).bytes();
        }
      }
      reads = new int[n][];
      int[] readerCount = new int[tensors];
      int[] mark = new int[tensors];
      Arrays.fill(mark, -1);
      for (int v = 0; v < n; v++) {
        Op op = g.op(v);
        if (OpTypes.SHAPE_ONLY.contains(op.type())) {
          reads[v] = new int[0];
          continue;
        }
        int[] r = new int[op.inputs().size()];
        int k = 0;
        for (TensorId in : op.inputs()) {
          int t = base[in.op()] + in.output();
          if (trans[t] && mark[t] != v) {
            mark[t] = v;
            r[k++] = t;
            readerCount[t]++;
          }
        }
        reads[v] = Arrays.copyOf(r, k);
      }
      readers = new int[tensors][];
      for (int t = 0; t < tensors; t++) {
        readers[t] = new int[readerCount[t]];
      }
      remainingReaders = readerCount.clone();
      Arrays.fill(readerCount, 0);
      for (int v = 0; v < n; v++) {
        for (int t : reads[v]) {
          readers[t][readerCount[t]++] = v;
        }
      }
      freed = new long[n];
      stamp = new int[n];
      ready = new boolean[n];
      done = new boolean[n];
    }

    int[] run() {
      int[] indeg = new int[n];
      for (int v = 0; v < n; v++) {
        indeg[v] = sg.preds[v].length;
        if (indeg[v] == 0) {
          makeReady(v);
        }
      }
      int[] order = new int[n];
      int k = 0;
      while (!heap.isEmpty()) {
        Entry e = heap.poll();
        int v = e.op;
        if (done[v] || e.stamp != stamp[v]) {
          continue; // stale: the op was re-queued with a higher priority
        }
        done[v] = true;
        order[k++] = v;
        for (int t : reads[v]) {
          if (--remainingReaders[t] == 1) {
            int last = lastReader(t);
            if (ready[last] && !done[last]) {
              freed[last] += bytes[t];
              push(last);
            }
          }
        }
        for (int s : sg.succs[v]) {
          if (--indeg[s] == 0) {
            makeReady(s);
          }
        }
      }
      if (k != n) {
        throw new IllegalStateException("list scheduler placed " + k + " of " + n + " ops");
      }
      return order;
    }

    private void makeReady(int v) {
      ready[v] = true;
      long f = 0;
      for (int t : reads[v]) {
        if (remainingReaders[t] == 1) {
          f += bytes[t];
        }
      }
      freed[v] = f;
      push(v);
    }

    private void push(int v) {
      heap.add(new Entry(freed[v] - sg.alloc[v], sg.levelRank[v], v, ++stamp[v]));
    }

    private int lastReader(int t) {
      for (int r : readers[t]) {
        if (!done[r]) {
          return r;
        }
      }
      throw new IllegalStateException("no unscheduled reader left");
    }
  }
}
