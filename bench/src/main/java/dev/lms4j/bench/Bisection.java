package dev.lms4j.bench;

import java.io.IOException;

/** Finds the smallest budget (in MiB) at which a run succeeds, by bisection. */
final class Bisection {
  private Bisection() {}

  /** A probe: does the run succeed at this many MiB? */
  interface Probe {
    boolean fits(long mib) throws IOException;
  }

  /**
   * Where a bisection stopped: {@code fits} is the smallest MiB that fitted (-1 when none did),
   * {@code fails} the largest MiB known not to fit (the search's lower bound when no probe
   * failed). Budgets strictly between the two were not probed.
   */
  record Edge(long fails, long fits) {
    /** True when {@code mib} lies strictly between the two bounds: not probed either way. */
    boolean unknown(long mib) {
      return fits > 0 && mib > fails && mib < fits;
    }
  }

  /**
   * The smallest MiB in {@code (lo, hi]} that fits, assuming {@code hi} fits and fitting is
   * monotone; returns -1 when {@code hi} does not fit.
   */
  static long smallest(long lo, long hi, long resolutionMib, Probe p) throws IOException {
    return search(lo, hi, resolutionMib, p).fits();
  }

  /** {@link #smallest} with the bound that failed last, to tell what was left unprobed. */
  static Edge search(long lo, long hi, long resolutionMib, Probe p) throws IOException {
    return search(lo, hi, resolutionMib, 1, p);
  }

  /**
   * As {@link #search(long, long, long, Probe)}, probing {@code hi} up to {@code topTries}
   * times before giving up: where {@code hi} is a budget at which the same graph trained once
   * (another search's answer), a single run out of memory there may be the edge's variation
   * between runs, not the method's limit.
   */
  static Edge search(long lo, long hi, long resolutionMib, int topTries, Probe p)
      throws IOException {
    boolean top = false;
    for (int i = 0; i < topTries && !top; i++) {
      top = p.fits(hi);
    }
    if (!top) {
      return new Edge(hi, -1);
    }
    while (hi - lo > resolutionMib) {
      long mid = (lo + hi) >>> 1;
      if (p.fits(mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return new Edge(lo, hi);
  }
}
