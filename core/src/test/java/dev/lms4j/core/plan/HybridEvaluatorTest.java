package dev.lms4j.core.plan;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import org.junit.jupiter.api.Test;

/**
 * The hybrid search simulates many decision sets more than once (a refinement undoes a choice,
 * tries the next, puts it back); the evaluator answers a decision set it has simulated from
 * what it remembered, and that answer is the one a fresh simulation gives.
 */
class HybridEvaluatorTest {
  private static final long MB = 1L << 20;

  @Test
  void aDecisionSetSimulatedBeforeIsAnsweredAsAFreshSimulationAnswersIt() {
    DataflowGraph g = SyntheticGraphs.trainingChain(12, MB, 64 * 1024);
    HybridPlanner.Options o = HybridPlanner.Options.of(8 * MB);
    TensorPolicy policy = TensorPolicy.builtin(g);
    HybridState state = new HybridState(g);
    int[] pos = new int[g.size()];
    HybridEvaluator eval = new HybridEvaluator(g, state, policy, o.tier(), pos);
    state.addAll(HybridCandidates.find(g, o, policy, pos));
    assertThat(state.candidates).hasSizeGreaterThan(2);

    HybridEvaluator.Sim kept = eval.simulate();
    // a swap (a recomputation changes the recompute plan too; a swap only the swap plan)
    HybridCandidate c = state.candidates.stream()
        .filter(x -> x.options.stream().anyMatch(op -> op.kind() == HybridCandidate.Kind.SWAP))
        .findFirst().orElseThrow();
    int swap = 0;
    while (c.options.get(swap).kind() != HybridCandidate.Kind.SWAP) {
      swap++;
    }
    state.set(c, swap);
    HybridEvaluator.Sim freed = eval.simulate();
    state.undo(c);
    HybridEvaluator.Sim keptAgain = eval.simulate();
    state.set(c, swap);
    HybridEvaluator.Sim freedAgain = eval.simulate();

    // a changed decision is simulated anew; the two repeats are remembered, and still counted
    assertThat(freed.swaps().swapOuts()).hasSize(1);
    assertThat(freed.peak()).isLessThan(kept.peak());
    assertThat(eval.simulations()).isEqualTo(4);
    assertThat(eval.repeats()).isEqualTo(2);
    assertThat(keptAgain.peak()).isEqualTo(kept.peak());
    assertThat(keptAgain.liveAtPeak()).isEqualTo(kept.liveAtPeak());

    // a fresh evaluator, with nothing remembered, gives the remembered answer
    HybridEvaluator fresh = new HybridEvaluator(g, state, policy, o.tier(), pos);
    HybridEvaluator.Sim f = fresh.simulate();
    assertThat(fresh.repeats()).isZero();
    assertThat(freedAgain.peak()).isEqualTo(f.peak());
    assertThat(freedAgain.liveAtPeak()).isEqualTo(f.liveAtPeak());
    assertThat(freedAgain.swaps()).isEqualTo(f.swaps());
    assertThat(freedAgain.recompute()).isEqualTo(f.recompute());
  }
}
