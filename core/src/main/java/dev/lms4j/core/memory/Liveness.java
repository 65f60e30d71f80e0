package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.graph.Levels;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

/**
 * Lifetimes of tensors in a schedule, and producer-consumer distances in levels (TFLMS's
 * distance: the consumer's level minus the producer's).
 */
public final class Liveness {
  private Liveness() {}

  /**
   * A tensor's lifetime in a schedule.
   *
   * @param tensor  the tensor
   * @param defined position of its producer in the schedule
   * @param lastUse position of its last (non shape-only) reader; {@code defined} when none
   * @param bytes   its size
   */
  public record Interval(TensorId tensor, int defined, int lastUse, long bytes) {
    /** Number of schedule positions it spans. */
    public int length() {
      return lastUse - defined;
    }
  }

  /**
   * One data edge and its distance.
   *
   * @param tensor   the tensor read
   * @param consumer the reading op
   * @param distance level of the consumer minus level of the producer
   */
  public record Edge(TensorId tensor, int consumer, int distance) {}

  /** Lifetimes of every transient tensor for {@code order}. */
  public static List<Interval> intervals(DataflowGraph g, int[] order) {
    int[] pos = new int[g.size()];
    for (int i = 0; i < order.length; i++) {
      pos[order[i]] = i;
    }
    List<Interval> out = new ArrayList<>();
    for (Op op : g.ops()) {
      if (MemorySimulator.isPinned(op)) {
        continue;
      }
      for (int i = 0; i < op.outputs().size(); i++) {
        if (op.output(i).persistent()) {
          continue;
        }
        TensorId t = new TensorId(op.id(), i);
        int last = pos[op.id()];
        for (int c : g.consumers(t)) {
          if (!OpTypes.SHAPE_ONLY.contains(g.op(c).type())) {
            last = Math.max(last, pos[c]);
          }
        }
        out.add(new Interval(t, pos[op.id()], last, op.output(i).bytes()));
      }
    }
    return out;
  }

  /** Every data edge with its level distance. */
  public static List<Edge> distances(DataflowGraph g, Levels lv) {
    List<Edge> out = new ArrayList<>();
    for (Op op : g.ops()) {
      for (TensorId in : op.inputs()) {
        out.add(new Edge(in, op.id(), lv.level(op.id()) - lv.level(in.op())));
      }
    }
    return out;
  }

  /**
   * A histogram of distances weighted by bytes, in power-of-two buckets: key {@code k} counts
   * edges with distance in {@code [2^k, 2^(k+1))} (key -1 for distance 0 or less).
   */
  public static TreeMap<Integer, long[]> distanceHistogram(DataflowGraph g, Levels lv) {
    TreeMap<Integer, long[]> h = new TreeMap<>();
    for (Edge e : distances(g, lv)) {
      int k = e.distance() <= 0 ? -1 : 31 - Integer.numberOfLeadingZeros(e.distance());
      long[] cell = h.computeIfAbsent(k, x -> new long[2]);
      cell[0]++;
      cell[1] += g.tensor(e.tensor()).bytes();
    }
    return h;
  }
}
