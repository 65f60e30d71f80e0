package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.plan.PlanApplier;
import dev.lms4j.core.plan.PlanSimulator;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.plan.TflmsSwapPlanner;
import dev.lms4j.core.graph.Levels;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The fast plan simulator must agree exactly with rewriting the graph and simulating it. */
class PlanSimulatorTest {
  @Test
  void agreesWithApplyThenSimulateForManyPlans() {
    DataflowGraph g = SyntheticGraphs.trainingChain(12, 1 << 20, 96 << 10);
    PlanSimulator fast = new PlanSimulator(g);
    int checked = 0;
    for (int th : new int[] {0, 1, 3, 7, 15}) {
      for (int ahead : new int[] {1, 2, 5}) {
        for (int gb : new int[] {0, 2, 40}) {
          for (int sync = 0; sync <= 3; sync++) {
            for (List<String> ser : List.of(List.<String>of(), List.of("3:9"))) {
              SwapPlan p = TflmsSwapPlanner.plan(g, SwapParams.builder().swapoutThreshold(th)
                  .swapinAhead(ahead).swapinGroupby(gb).syncMode(sync).serialization(ser)
                  .build());
              DataflowGraph r = PlanApplier.apply(g, p);
              long slow = MemorySimulator.simulate(r, Levels.of(r).schedule()).peakBytes();
              assertThat(fast.peak(p)).as("th %d ahead %d gb %d sync %d ser %s", th, ahead, gb,
                  sync, ser).isEqualTo(slow);
              checked++;
            }
          }
        }
      }
    }
    assertThat(checked).isEqualTo(360);
    assertThat(fast.peak(SwapPlan.empty(SwapParams.defaults())))
        .isEqualTo(MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes());
  }
}
