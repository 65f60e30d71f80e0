package dev.lms4j.core.plan;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.schedule.Scheduling;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Rematerialization recomputes only what its policy allows. {@link TensorPolicy} cannot yet
 * exclude a recomputable op by name, so this test narrows the policy's
 * {@link TensorPolicy#mayRecompute} predicate the search reads (the production path passes it
 * unchanged).
 */
class RematPolicyTest {
  private static final long MB = 1 << 20;

  private static Rematerializer.Result run(DataflowGraph g, long limit, Rematerializer.Mode m,
      String excluded) {
    TensorPolicy p = TensorPolicy.builtin(g);
    Rematerializer.Options o = Rematerializer.Options.defaults().withMode(m);
    return new RematSearch(g, limit, o,
        op -> p.mayRecompute(op) && !op.name().equals(excluded))
        .run(Scheduling.apply(g, o.scheduler()));
  }

  private static List<String> cloned(Rematerializer.Result r) {
    return r.plan().groups().stream().flatMap(gr -> gr.ops().stream()).toList();
  }

  /**
   * Chain of 20 layers (1 MiB activations, peak ~23.3 MiB) under a 16 MiB limit: each mode's
   * plan recomputes some activation; with that op excluded, neither mode clones it (nor names
   * it in a {@code remat} or {@code path} decision), and the plan still fits with others.
   */
  @Test
  void anExcludedOpIsNeverCloned() {
    DataflowGraph g = SyntheticGraphs.trainingChain(20, MB, 64 * 1024);
    long limit = 16 * MB;
    for (Rematerializer.Mode m : Rematerializer.Mode.values()) {
      Rematerializer.Result free = run(g, limit, m, null);
      assertThat(free.fits()).isTrue();
      assertThat(free.plan().groups()).isNotEmpty();
      // exclude an op the unrestricted plan recomputes
      String victim = cloned(free).get(0);
      Rematerializer.Result r = run(g, limit, m, victim);
      assertThat(cloned(r)).as(m + " mode").isNotEmpty().doesNotContain(victim);
      assertThat(r.decisions()).filteredOn(d -> d.action().equals("remat")
          || d.action().equals("path")).allSatisfy(d -> assertThat(d.ops())
          .doesNotContain(victim));
      assertThat(r.fits()).isTrue();
      assertThat(RecomputePlanner.peak(g, r.plan())).isEqualTo(r.peakAfter());
    }
  }
}
