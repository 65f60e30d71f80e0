package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.StepOrder;
import dev.lms4j.tf.TrainingGraph;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.NodeDef;

/**
 * The order the allocator model replays a plan in is the serial order of the graph the plan is
 * committed to, not of the graph it was made for: a plan's ops change what the chain leaves out.
 * Planning only (no TensorFlow step runs): a few seconds.
 */
class PlanStepOrderTest {
  private static final long MIB = 1L << 20;

  /**
   * The corpus mlp-mixed, the hybrid planner at 111 MiB: the plan recomputes a bias add from
   * the float16 product it reads. Read by the recomputation too, the product is no longer fused
   * with its bias add, and the chain of the committed graph takes both in, where the graph as
   * given left them out. The allocator
   * model's need for the plan differs between the two orders (102 and 110 MiB when this was
   * written), so the check must replay the committed graph's ({@link StepOrder#forPlan}).
   */
  @Test
  void aPlanIsReplayedInTheOrderOfTheGraphItIsCommittedTo() {
    TrainingGraph tg = Corpus.Family.MLP_MIXED.build(Corpus.Size.BENCH, 42);
    Manifest m = tg.manifest();
    LmsResult lr = Lms.builder().budget(111 * MIB).mode(LmsMode.HYBRID).build().rewrite(tg);
    assertThat(lr.memoryPlan().needed()).isTrue();
    StepOrder given = StepOrder.serial(tg.graphDef(), m.feedShapes(), m.runOps());
    StepOrder committed = StepOrder.serial(lr.graphDef(), m.feedShapes(), m.runOps());

    // the ops the plan's own ops (swap-outs, recomputations) read
    Set<String> readByPlan = new TreeSet<>();
    for (NodeDef n : lr.graphDef().getNodeList()) {
      if (n.getName().startsWith("lms4j/")) {
        n.getInputList().stream().filter(in -> !in.startsWith("^"))
            .forEach(in -> readByPlan.add(in.replaceAll(":\\d+$", "")));
      }
    }
    Set<String> nowChained = new TreeSet<>(given.unchained());
    nowChained.removeAll(committed.unchained());
    assertThat(nowChained).as("left out as given, chained once committed")
        .anyMatch(readByPlan::contains);

    // an order made with the commit hands each plan the committed graph's order, and the graph
    // as given keeps its own (no plan, or one that rewrites nothing)
    StepOrder perPlan = StepOrder.serial(tg.graphDef(), m.feedShapes(), m.runOps(),
        p -> lr.graphDef());
    assertThat(perPlan.forPlan(lr.memoryPlan()).unchained())
        .isEqualTo(committed.unchained());
    assertThat(perPlan.forPlan(null).unchained()).isEqualTo(given.unchained());

    // and the two orders are not the same to the allocator model
    DataflowGraph r = lr.memoryPlan().applyTo(lr.model());
    long asGiven = worst(r, given);
    long asCommitted = worst(r, committed);
    assertThat(asGiven).isPositive();
    assertThat(asCommitted).isPositive().isNotEqualTo(asGiven);
  }

  /** The allocator model's smallest budget for a step of {@code r} in {@code o}'s orders, MiB. */
  private static long worst(DataflowGraph r, StepOrder o) {
    long mib = 0;
    for (int[] order : o.orders(r)) {
      mib = Math.max(mib, BfcReplay.smallestMib(r, order, 1024));
    }
    return mib;
  }
}
