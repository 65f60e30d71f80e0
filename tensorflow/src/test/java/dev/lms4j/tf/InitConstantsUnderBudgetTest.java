package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.run.BudgetedRunner;
import dev.lms4j.tf.run.RunResult;
import org.junit.jupiter.api.Test;

/**
 * {@link InitConstants} under a real budget: each run is a worker JVM whose BFC allocator is
 * limited. SlotNet(16, 1024, 4096): layer 0's weight and its momentum slot are 16 MiB each, the
 * slot zero-filled in init.
 */
class InitConstantsUnderBudgetTest {
  private static final long MIB = 1 << 20;

  /**
   * Unmodified, grappler folds the slot's Fill into a 16 MiB constant that the cached init
   * executor holds for the session's life: measured here, the traced peak is 65.0 MiB
   * (weights 16 + slot 16 + the held constant 16 + the weight gradient 16 + small ones);
   * rewritten, 49.0 MiB (the same without the constant). A budget of 57 MiB lies between the
   * two: the unmodified graph runs out of memory, the rewritten one trains, with the unmodified
   * graph's unbudgeted losses bit for bit. (Under that budget the rewritten step's traced peak
   * reads 56.0 MiB, not 49: the BFC allocator hands out a free chunk whole when it is less than
   * twice the request, and the chunks differ under a tight budget.)
   */
  @Test
  void theRewrittenGraphTrainsWhereTheHeldConstantRunsOutOfMemory() throws Exception {
    TrainingGraph tg = SlotNet.build(16, 1024, 4096);
    InitConstants.Result r = InitConstants.rewrite(tg.graphDef(), tg.manifest().runOps());
    assertThat(r.fills()).containsExactly("w0_momentum_init/Fill");
    assertThat(r.bytes()).isEqualTo(16 * MIB);
    TrainingGraph rewritten = new TrainingGraph(r.graphDef(), tg.manifest());
    long budget = 57 * MIB;

    RunResult free = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, 3));
    assertThat(free.fits()).as(free.toString()).isTrue();
    assertThat(free.peakBytes()).isGreaterThan(budget + 4 * MIB);
    RunResult freeRewritten = BudgetedRunner.run(rewritten, BudgetedRunner.Options.of(0, 3));
    assertThat(freeRewritten.fits()).as(freeRewritten.toString()).isTrue();
    // the held constant, measured: 16 MiB (at least 15) fewer in use without it
    assertThat(freeRewritten.peakBytes()).isLessThan(free.peakBytes() - 15 * MIB)
        .isLessThan(budget - 4 * MIB);
    assertThat(freeRewritten.losses()).containsExactly(free.losses());

    RunResult off = BudgetedRunner.run(tg, BudgetedRunner.Options.of(budget, 3));
    assertThat(off.oom()).as(off.toString()).isTrue();

    RunResult on = BudgetedRunner.run(rewritten, BudgetedRunner.Options.of(budget, 3));
    assertThat(on.fits()).as(on.toString()).isTrue();
    assertThat(on.losses()).containsExactly(free.losses());
  }

  /**
   * A slot initialised by {@code ZerosLike} of its weight's initial value is folded and held
   * the same way (grappler knows the input's shape): measured here, 65.0 MiB traced peak
   * unmodified, 49.0 MiB with the ZerosLike rewritten to an unfolded Fill, same losses.
   */
  @Test
  void aZerosLikeSlotIsHeldTooAndTheRewriteFreesIt() throws Exception {
    TrainingGraph tg = SlotNet.build(16, 1024, 4096, true);
    InitConstants.Result r = InitConstants.rewrite(tg.graphDef(), tg.manifest().runOps());
    assertThat(r.fills()).containsExactly("w0_momentum_init/ZerosLike");
    RunResult free = BudgetedRunner.run(tg, BudgetedRunner.Options.of(0, 2));
    RunResult freeRewritten = BudgetedRunner.run(new TrainingGraph(r.graphDef(),
        tg.manifest()), BudgetedRunner.Options.of(0, 2));
    assertThat(free.fits()).as(free.toString()).isTrue();
    assertThat(freeRewritten.fits()).as(freeRewritten.toString()).isTrue();
    assertThat(freeRewritten.peakBytes()).isLessThan(free.peakBytes() - 15 * MIB);
    assertThat(freeRewritten.losses()).containsExactly(free.losses());
  }

  /**
   * {@link Lms#rewrite} runs it with the other rewrites before planning when the graph does not
   * fit (the simulated step peak, 48.6 MiB, is above 0.8 x 57 MiB) and counts it in
   * {@link LmsResult.PreRewrites}. At 57 MiB no plan keeps the margin (the floor needs 61 MiB),
   * and the graph as given is predicted to fit: the fallback to it keeps the rewritten Fills,
   * which only free memory, so the result is the graph the budgeted test above trains. Where the
   * graph fits as given, the Fills stay; turned off, the held constant makes 57 MiB impossible.
   */
  @Test
  void lmsRewritesInitFillsUnlessTurnedOff() {
    TrainingGraph tg = SlotNet.build(16, 1024, 4096);
    LmsResult on = Lms.builder().budget(57 * MIB).mode(LmsMode.AUTO).build().rewrite(tg);
    assertThat(on.preRewrites().initConstants()).isEqualTo(1);
    assertThat(on.preRewrites().initConstantBytes()).isEqualTo(16 * MIB);
    assertThat(on.rewritten()).isTrue();
    // the rewritten graph is chained (the serial order, on by default)
    assertThat(on.graphDef()).isEqualTo(SerialOrder.enforce(
        InitConstants.rewrite(tg.graphDef(), tg.manifest().runOps()).graphDef(),
        tg.manifest()).graphDef());

    // turned off, the model counts the 16 MiB constant init leaves held (InitHeldConstants):
    // the graph as given does not fit 57 MiB (the test above runs out of memory there), and no
    // plan can move a resident constant, so the budget is refused
    assertThatThrownBy(() -> Lms.builder().budget(57 * MIB).mode(LmsMode.AUTO)
        .initConstants(false).build().rewrite(tg)).isInstanceOf(PlanningException.class);

    LmsResult fits = Lms.builder().budget(200 * MIB).mode(LmsMode.AUTO).build().rewrite(tg);
    assertThat(fits.preRewrites()).isEqualTo(LmsResult.PreRewrites.NONE);
    assertThat(fits.graphDef()).isEqualTo(tg.graphDef());
  }
}
