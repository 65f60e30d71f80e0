package dev.lms4j.core.plan;

/**
 * A device memory budget and the share of it a simulated peak may use. {@link #limit()} is the
 * one place the two are multiplied; {@link #smallestBudgetFor(long)} is its inverse, the budget a
 * simulated peak needs.
 *
 * <pre>{@code
 * Budget b = Budget.of(512L << 20);          // memory ratio 0.8
 * long limit = b.limit();                    // 409.6 MiB for the simulated peak
 * }</pre>
 *
 * @param bytes    the budget in bytes; 0 when none is set
 * @param memRatio the share of the budget the simulated peak may use, in (0, 1] (TFLMS's
 *                 {@code TF_LMS_SIMULATOR_MEM_RATIO}); the rest is margin for fragmentation and
 *                 kernel scratch memory the simulator does not see
 */
public record Budget(long bytes, double memRatio) {
  /** lms4j's default memory ratio. */
  public static final double DEFAULT_MEM_RATIO = 0.8;

  public Budget {
    if (bytes < 0) {
      throw new IllegalArgumentException("budget must be >= 0 bytes");
    }
    if (!(memRatio > 0 && memRatio <= 1)) {
      throw new IllegalArgumentException("memory ratio must be in (0, 1], not " + memRatio);
    }
  }

  /** No budget (planners that need one refuse it). */
  public static Budget none() {
    return new Budget(0, DEFAULT_MEM_RATIO);
  }

  /** A budget with the default memory ratio. */
  public static Budget of(long bytes) {
    return new Budget(bytes, DEFAULT_MEM_RATIO);
  }

  /** The same budget with another memory ratio. */
  public Budget withMemRatio(double r) {
    return new Budget(bytes, r);
  }

  /** True when a budget is set. */
  public boolean isSet() {
    return bytes > 0;
  }

  /** The simulated peak a plan may reach: bytes x memory ratio (Long.MAX_VALUE when unset). */
  public long limit() {
    return isSet() ? (long) (bytes * memRatio) : Long.MAX_VALUE;
  }

  /** True when a simulated peak fits under {@link #limit()}. */
  public boolean fits(long simulatedPeak) {
    return simulatedPeak <= limit();
  }

  /** The smallest budget whose limit a simulated peak fits under, at this memory ratio. */
  public long smallestBudgetFor(long simulatedPeak) {
    return (long) Math.ceil(simulatedPeak / memRatio);
  }

  /**
   * Refuses this budget when a floor (resident tensors plus the largest op's working set, {@code
   * LowerBound}) does not fit under its limit, naming the smallest budget that could work.
   *
   * @throws PlanningException when the floor does not fit
   */
  public void requireFloor(long floorBytes) {
    if (isSet() && !fits(floorBytes)) {
      long need = smallestBudgetFor(floorBytes);
      throw new PlanningException("A budget of " + mib(bytes) + " MiB cannot work: resident "
          + "tensors (weights, constants, feeds unless they stay in host memory) plus the "
          + "largest op's working set need "
          + mib(floorBytes) + " MiB, so the smallest budget that could work is about "
          + mibUp(need) + " MiB (at memory ratio " + memRatio + ").", need);
    }
  }

  /** Whole MiB, rounded down, for messages. */
  public static long mib(long b) {
    return b >> 20;
  }

  /** Whole MiB, rounded up, for messages naming a budget that could work. */
  public static long mibUp(long b) {
    return (b + (1 << 20) - 1) >> 20;
  }

  @Override
  public String toString() {
    return isSet() ? mib(bytes) + " MiB at memory ratio " + memRatio : "no budget";
  }
}
