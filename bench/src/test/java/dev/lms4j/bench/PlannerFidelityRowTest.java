package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.corpus.Corpus;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * One real row of the planner fidelity table (budgeted worker JVMs): the corpus GRU at the small
 * size, without LMS and with {@code auto} at 85% of its predicted need.
 */
class PlannerFidelityRowTest {

  @Test
  void noLmsAndAutoRowsArePredictedRunAndBisected() throws Exception {
    Fidelity.Case c = Fidelity.corpus("gru", Corpus.Size.SMALL);
    TrainingGraph tg = c.build().get();
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    PlannerFidelity.Runs runs = new PlannerFidelity.Runs(new PrintStream(log, true,
        StandardCharsets.UTF_8));

    ObjectNode none = PlannerFidelity.noLms(c.label(), tg, runs);
    long predicted = none.path("predicted_mib").asLong();
    long real = none.path("real_min_mib").asLong();
    assertThat(predicted).isPositive();
    assertThat(real).isPositive();
    // the bisection's edge: the real minimum trains, the budget below it was seen to fail (or
    // it is the first MiB), within the resolution
    PlannerFidelity.Known k = runs.known(tg.graphDef());
    assertThat(k.fits).containsEntry(real, true);
    assertThat(real - none.path("real_fails_mib").asLong())
        .isBetween(1L, Math.max(1, (long) Math.ceil(real * 1.1 * PlannerFidelity.RESOLUTION)));
    assertThat(none.path("error").asDouble()).isEqualTo((double) predicted / real - 1);

    ObjectNode auto = PlannerFidelity.planned(c.label(), tg, predicted, LmsMode.AUTO, 0.85,
        runs);
    long budget = Math.max(1, Math.round(predicted * 0.85));
    assertThat(auto.path("budget_mib").asLong()).isEqualTo(budget);
    assertThat(auto.path("planner").asText()).isNotEqualTo("error");
    if (!auto.path("planner").asText().equals("refused")) {
      // an accepted plan is run at its budget and bisected; whatever the probe accepts trains
      assertThat(auto.path("no_probe").asText()).isIn("trains", "oom");
      assertThat(auto.path("real_min_mib").asLong()).isPositive();
      assertThat(auto.path("predicted_mib").asLong()).isPositive();
    }
    assertThat(auto.path("probe").asText()).isIn("accepted", "replanned", "unmodified",
        "refused");
    if (!auto.path("after_probe").asText().equals("-")) {
      assertThat(auto.path("after_probe").asText()).isEqualTo("trains");
    }
    assertThat(runs.workerRuns).isPositive();
  }
}
