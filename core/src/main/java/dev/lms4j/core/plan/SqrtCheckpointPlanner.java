package dev.lms4j.core.plan;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Chen et al.'s sqrt(n) checkpointing ("Training Deep Nets with Sublinear Memory Cost") as a
 * baseline: the recomputable forward ops, in topological order, are cut into about sqrt(n)
 * segments; the last op of each segment is a checkpoint (kept), the others are recomputed in the
 * backward pass from the previous checkpoint. Expensive ops (convolutions, matmuls) are
 * recomputed too, so the saving costs about one extra forward pass.
 *
 * <pre>{@code
 * RecomputePlan p = SqrtCheckpointPlanner.plan(graph);
 * }</pre>
 */
public final class SqrtCheckpointPlanner {
  private SqrtCheckpointPlanner() {}

  /** The plan for {@code segments} segments; {@code segments <= 0} means round(sqrt(n)). */
  public static RecomputePlan plan(DataflowGraph g, int segments) {
    List<Op> forward = new ArrayList<>();
    for (int v : g.topologicalOrder()) {
      Op op = g.op(v);
      if (RecomputePlanner.recomputable(op)) {
        forward.add(op);
      }
    }
    int n = forward.size();
    if (n < 2) {
      return RecomputePlan.empty();
    }
    int k = segments > 0 ? segments : (int) Math.max(1, Math.round(Math.sqrt(n)));
    int size = (n + k - 1) / k;
    Set<String> recompute = new LinkedHashSet<>();
    for (int i = 0; i < n; i++) {
      boolean checkpoint = (i + 1) % size == 0 || i == n - 1;
      if (!checkpoint) {
        recompute.add(forward.get(i).name());
      }
    }
    return RecomputePlanner.manual(g, recompute);
  }

  /** The plan for round(sqrt(n)) segments. */
  public static RecomputePlan plan(DataflowGraph g) {
    return plan(g, 0);
  }
}
