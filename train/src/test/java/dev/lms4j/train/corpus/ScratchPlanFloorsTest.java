package dev.lms4j.train.corpus;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.PlanningException;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import org.junit.jupiter.api.Test;

class ScratchPlanFloorsTest {
  @Test
  void floors() {
    String fams = System.getProperty("fams", "lstm,gru,encoder,unet");
    Corpus.Size size = Corpus.Size.valueOf(System.getProperty("size", "SMALL"));
    for (String f : fams.split(",")) {
      TrainingGraph tg = Corpus.getOrThrow(f).build(size, 42);
      LmsResult base = Lms.builder().budget(1L << 40).mode(LmsMode.AUTO).build().rewrite(tg);
      System.out.printf("%s: peak before %.1f MiB%n", f, base.predictedPeakBefore() / 1048576.0);
      for (LmsMode m : new LmsMode[] {LmsMode.TFLMS, LmsMode.SWAP, LmsMode.REMAT, LmsMode.AUTO}) {
        for (boolean pre : new boolean[] {false, true}) {
          long lo = 1, hi = (base.predictedPeakBefore() >> 10) * 2 + 4;
          String why = "";
          LmsResult bestR = null;
          while (hi - lo > Math.max(1, hi / 100)) {
            long mid = (lo + hi) / 2;
            try {
              LmsResult r = Lms.builder().budget(mid << 10).mode(m).gradientSums(pre)
                  .optimizerEdges(pre).build().rewrite(tg);
              hi = mid; bestR = r;
            } catch (PlanningException e) {
              lo = mid; why = e.getMessage();
            }
          }
          System.out.printf("  %-6s pre=%-5s smallest planned budget %.2f MiB (%s) pre=%s; last refusal: %s%n",
              m.cliName(), pre, hi / 1024.0, bestR == null ? "-" : bestR.planner(),
              bestR == null ? "-" : bestR.preRewrites(), why.length() > 200 ? why.substring(0, 200) : why);
        }
      }
    }
  }
}
