package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.plan.Rematerializer;
import dev.lms4j.core.plan.VariableReads;
import dev.lms4j.core.graph.Levels;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A clone of an op that reads a variable runs in the backward pass; when nothing orders it
 * before the optimizer's update of that variable, it may compute with the updated value (GPT-2's
 * layer norm {@code Add_1 = Mul_1 + beta}, recomputed by XLA-style remat, read the new
 * {@code beta} and moved the second loss by one ulp). Every clone that reads a written variable
 * gets a control edge to the writer; a clone of an op that reads no written variable gets none.
 *
 * <p>The graph: x (feed), beta (variable), k (variable, never written), a = Mul(x, x) (16 KB),
 * y = Add(a, beta) (16 KB, read by the backward pass only late), z = Add(y, k) and a chain of
 * ops to the loss; backward: g = Fill(loss), dbeta = Sum(g) (all beta's update needs), its
 * update right away, then a long gradient chain, and at its end the weight-like gradient
 * MatMul(y, g2) that reads y. Without the edge (RecomputeApplier before this guard) both tests
 * fail: the update has no control input from the clone.
 */
class VariableReadsTest {
  private static final long KB = 1024;

  static DataflowGraph graph() {
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(16 * KB))
        .op("beta", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("k", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("a", "Mul", OpCategory.FORWARD, List.of("x", "x"), Tensor.ofBytes(16 * KB))
        .op("y", "Add", OpCategory.FORWARD, List.of("a", "beta"), Tensor.ofBytes(16 * KB))
        .op("z", "Add", OpCategory.FORWARD, List.of("y", "k"), Tensor.ofBytes(16 * KB))
        .op("z2", "Relu", OpCategory.FORWARD, List.of("z"), Tensor.ofBytes(16 * KB))
        .op("loss", "Sum", OpCategory.FORWARD, List.of("z2"), Tensor.ofBytes(4))
        .op("gradients/g", "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes(16 * KB))
        .op("gradients/dbeta", "Sum", OpCategory.BACKWARD, List.of("gradients/g"),
            Tensor.ofBytes(KB))
        .op("train/beta", "ApplyGradientDescent", OpCategory.OPTIMIZER,
            List.of("beta", "gradients/dbeta"), Tensor.persistent(KB))
        .op("gradients/g1", "ReluGrad", OpCategory.BACKWARD, List.of("gradients/g", "z2"),
            Tensor.ofBytes(16 * KB))
        .op("gradients/g2", "Neg", OpCategory.BACKWARD, List.of("gradients/g1"),
            Tensor.ofBytes(16 * KB))
        .op("gradients/dw", "MatMul", OpCategory.BACKWARD, List.of("y", "gradients/g2"),
            Tensor.ofBytes(KB))
        .op("train/step", "NoOp", OpCategory.OPTIMIZER, "",
            List.of("^train/beta", "^gradients/dw"), List.of())
        .build();
  }

  @Test
  void cloneOfAReadOfAnUpdatedVariableRunsBeforeTheUpdate() {
    DataflowGraph g = graph();
    assertThat(VariableReads.readsUpdatedVariable(g, g.opOrThrow("y"))).isTrue();
    assertThat(VariableReads.readsUpdatedVariable(g, g.opOrThrow("z"))).as("k is never written")
        .isFalse();
    assertThat(VariableReads.readsUpdatedVariable(g, g.opOrThrow("a"))).isFalse();

    RecomputePlan plan = RecomputePlanner.manual(g, java.util.Set.of("y"));
    assertThat(plan.groups()).hasSize(1);
    DataflowGraph rw = RecomputeApplier.apply(g, plan);
    Op clone = rw.opOrThrow(RecomputePlan.cloneName(plan.groups().get(0).name(), "y"));
    Op update = rw.opOrThrow("train/beta");
    assertThat(update.controlInputs()).containsExactly(clone.id());
    int[] order = Levels.of(rw).schedule();
    assertThat(position(order, clone.id())).isLessThan(position(order, update.id()));
  }

  @Test
  void rematerializerPlansKeepTheEdge() {
    DataflowGraph g = graph();
    long peak = RecomputePlanner.peak(g, RecomputePlan.empty());
    Rematerializer.Result r = Rematerializer.bestEffort(g, peak - 1,
        Rematerializer.Options.defaults());
    assertThat(r.plan().groups()).isNotEmpty();
    DataflowGraph rw = RecomputeApplier.apply(g, r.plan());
    int[] order = Levels.of(rw).schedule();
    Op update = rw.opOrThrow("train/beta");
    int checked = 0;
    for (RecomputePlan.Group gr : r.plan().groups()) {
      for (String op : gr.ops()) {
        if (VariableReads.readsUpdatedVariable(g, g.opOrThrow(op))) {
          Op clone = rw.opOrThrow(RecomputePlan.cloneName(gr.name(), op));
          assertThat(update.controlInputs()).contains(clone.id());
          assertThat(position(order, clone.id())).isLessThan(position(order, update.id()));
          checked++;
        }
      }
    }
    // the plan recomputes y (16 KB, read late), which reads beta
    assertThat(checked).as(r.plan().toString()).isPositive();
  }

  private static int position(int[] order, int id) {
    for (int i = 0; i < order.length; i++) {
      if (order[i] == id) {
        return i;
      }
    }
    throw new AssertionError("op " + id + " not scheduled");
  }
}
