package dev.lms4j.core.memory;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpTypes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Chooses the order init creates a graph's variables in ({@link BfcReplay.Layout}) so that
 * TensorFlow's BFC allocator fits them and the step under the smallest limit. A variable that
 * holds a large share of the limit gets, when it is created early, a region of the next power of
 * two and all of it as one chunk (measured: the corpus embedding-sparse's 48.8 MiB table held a
 * 64 MiB chunk, and TensorFlow needed 71 MiB for a step whose live bytes peak at 53). Created
 * last, after a primer has grown a region for everything else, it gets a region cut to what is
 * left under the limit.
 *
 * <p>The candidates: the graph's order; then the largest 1 to {@link #MAX_LAST} variables
 * created last (ascending), each after no primer, after a primer of 2, 4, 8, ... MiB (the sizes
 * of the regions the allocator grows, up to half the limit) just before them, or after one of
 * 4, 8, ... MiB allocated before anything else (it sets the first region's size). Only
 * variables of at least {@link #LARGE_SHARE} of the limit are moved: where none is that large,
 * the region a variable wastes is small against the limit and the graph's order is the only
 * candidate. Each candidate is one replay per limit tried, so a graph with a large variable
 * costs at most {@code 1 + 2 * MAX_LAST * primers} replays per limit ({@code primers}: the
 * sizes from 2 MiB to half the limit).
 */
public final class ResidentLayouts {
  /** The share of the limit a variable must hold to be created last. */
  public static final double LARGE_SHARE = 0.1;
  /** The most variables created last. */
  public static final int MAX_LAST = 3;
  private static final long FIRST_PRIMER = 2L << 20;

  /**
   * A layout and what it needs.
   *
   * @param layout    the layout
   * @param needBytes the smallest limit its replay fits, bytes (a whole MiB)
   */
  public record Choice(BfcReplay.Layout layout, long needBytes) {}

  private ResidentLayouts() {}

  /** The candidate layouts of {@code g} under {@code limit}, the graph's order first. */
  public static List<BfcReplay.Layout> candidates(DataflowGraph g, long limit) {
    List<BfcReplay.Layout> out = new ArrayList<>();
    out.add(BfcReplay.Layout.GRAPH_ORDER);
    List<Op> large = new ArrayList<>();
    for (Op op : g.ops()) {
      if (OpTypes.VARIABLES.contains(op.type())
          && MemorySimulator.residentBytes(g, op) >= LARGE_SHARE * limit) {
        large.add(op);
      }
    }
    // largest first; ties in op order
    large.sort(Comparator.comparingLong((Op op) -> -MemorySimulator.residentBytes(g, op))
        .thenComparingInt(Op::id));
    for (int k = 1; k <= Math.min(MAX_LAST, large.size()); k++) {
      int[] last = new int[k];
      for (int i = 0; i < k; i++) {
        last[i] = large.get(k - 1 - i).id(); // ascending: the largest is created last
      }
      out.add(new BfcReplay.Layout(last, 0));
      for (long p = FIRST_PRIMER; p <= limit / 2; p *= 2) {
        out.add(new BfcReplay.Layout(last, p));
        if (p > FIRST_PRIMER) {
          // a first region of p (a primer of 2 MiB first changes nothing: the first region is)
          out.add(new BfcReplay.Layout(last, p, true));
        }
      }
    }
    return out;
  }

  /**
   * A candidate whose replay of {@code order} fits {@code limit}, or null when none does: the
   * graph's order where it fits, else {@link #roomiest}.
   */
  public static BfcReplay.Layout fitting(DataflowGraph g, int[] order, long limit) {
    if (BfcReplay.replay(g, order, limit).fits()) {
      return BfcReplay.Layout.GRAPH_ORDER;
    }
    return roomiest(g, order, limit);
  }

  /**
   * Of the candidates that move variables and whose replay fits {@code limit}, the one with the
   * fewest variables moved and, of those, the most room beside them (the regions there are before
   * the last variables, {@link BfcReplay.Result#roomBytes}; ties: the earlier candidate); null
   * when none fits. The last variables' regions are cut to what is left either way, and the room
   * beside them is what the step has: the replay lays the small variables out as tightly as their
   * sizes allow, but init's own temporaries take whole chunks of the early regions too, and the
   * step's order varies between runs. Measured on the corpus embedding-resource at 66 MiB: a
   * momentum slot's zeros held a 2 MiB chunk for 1 MiB, the 2 MiB primer grew no region, and the
   * step found 3 MiB beside the table where the replay had room (out of memory); with a 4 or 8
   * MiB primer it trained down to 63 MiB. On embedding-sparse at 66 MiB with a 2 MiB primer the
   * step used 4.3 to 5.5 of the 6 MiB beside the table, from run to run.
   */
  public static BfcReplay.Layout roomiest(DataflowGraph g, int[] order, long limit) {
    BfcReplay.Layout found = null;
    long room = -1;
    for (BfcReplay.Layout l : candidates(g, limit)) {
      if (l.isGraphOrder()) {
        continue;
      }
      if (found != null && l.last().length > found.last().length) {
        break;
      }
      BfcReplay.Result r = BfcReplay.replay(g, order, limit, l);
      if (r.fits() && r.roomBytes() > room) {
        found = l;
        room = r.roomBytes();
      }
    }
    return found;
  }

  /**
   * The candidate (for a limit of {@code limitBytes}) that needs the smallest limit, in whole
   * MiB up to {@code maxMib}; the graph's order wins ties. Null when none fits {@code maxMib}.
   */
  public static Choice best(DataflowGraph g, int[] order, long limitBytes, long maxMib) {
    Choice best = null;
    for (BfcReplay.Layout l : candidates(g, limitBytes)) {
      long mib = BfcReplay.smallestMib(g, order, best == null ? maxMib
          : (best.needBytes >> 20) - 1, l);
      if (mib > 0) {
        best = new Choice(l, mib << 20);
      }
    }
    return best;
  }
}
