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
   * The smallest MiB in {@code (lo, hi]} that fits, assuming {@code hi} fits and fitting is
   * monotone; returns -1 when {@code hi} does not fit.
   */
  static long smallest(long lo, long hi, long resolutionMib, Probe p) throws IOException {
    if (!p.fits(hi)) {
      return -1;
    }
    while (hi - lo > resolutionMib) {
      long mid = (lo + hi) >>> 1;
      if (p.fits(mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return hi;
  }
}
