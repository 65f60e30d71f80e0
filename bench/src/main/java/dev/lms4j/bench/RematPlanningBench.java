package dev.lms4j.bench;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.plan.Rematerializer;
import dev.lms4j.core.schedule.Scheduling;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Planning time of the rematerializer on SyntheticGraphs.trainingChain (1 MiB activations):
 * standard and path mode alternate (A/B) over a few rounds, the median is printed with the
 * simulator runs and whether the limit was met.
 *
 * <pre>{@code
 * java -cp cli/target/lms4j.jar dev.lms4j.bench.RematPlanningBench [layers] [rounds]
 * }</pre>
 */
public final class RematPlanningBench {
  private RematPlanningBench() {}

  /** Runs the benchmark: args {@code [layers (2000)] [rounds (3)]}. */
  public static void main(String[] args) {
    int layers = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
    DataflowGraph g = SyntheticGraphs.trainingChain(layers, 1 << 20, 4096);
    long peak = Scheduling.levelledPeak(g);
    System.out.printf(Locale.ROOT, "trainingChain(%d): %d ops, simulated peak %d MiB%n",
        layers, g.size(), peak >> 20);
    System.out.println("mode      limit  ms(median)  simulations  recomputed  peak MiB  fits");
    for (double f : new double[] {0.7, 0.4}) {
      long limit = (long) (peak * f);
      List<List<Long>> ms = List.of(new ArrayList<>(), new ArrayList<>());
      Rematerializer.Result[] last = new Rematerializer.Result[2];
      for (int r = 0; r < rounds; r++) {
        for (Rematerializer.Mode m : Rematerializer.Mode.values()) {
          long t0 = System.nanoTime();
          last[m.ordinal()] = Rematerializer.bestEffort(g, limit,
              Rematerializer.Options.defaults().withMode(m));
          ms.get(m.ordinal()).add((System.nanoTime() - t0) / 1_000_000);
        }
      }
      for (Rematerializer.Mode m : Rematerializer.Mode.values()) {
        List<Long> t = new ArrayList<>(ms.get(m.ordinal()));
        t.sort(null);
        Rematerializer.Result res = last[m.ordinal()];
        System.out.printf(Locale.ROOT, "%-9s %4.0f%%  %10d  %11d  %10d  %8d  %s%n",
            m.name().toLowerCase(Locale.ROOT), f * 100, t.get(t.size() / 2), res.simulations(),
            res.plan().clonedOps(), res.peakAfter() >> 20, res.fits());
      }
    }
  }
}
