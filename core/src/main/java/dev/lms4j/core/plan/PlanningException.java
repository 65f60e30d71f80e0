package dev.lms4j.core.plan;

/**
 * No plan fits the budget. {@link #smallestBudgetBytes()} is the smallest budget that could work
 * (an estimate from the simulator or the lower bound), and the message names it.
 */
public final class PlanningException extends RuntimeException {
  private final long smallestBudgetBytes;

  /** A failure naming the smallest budget that could work. */
  public PlanningException(String message, long smallestBudgetBytes) {
    super(message);
    this.smallestBudgetBytes = smallestBudgetBytes;
  }

  /** The smallest budget, in bytes, that a plan could meet. */
  public long smallestBudgetBytes() {
    return smallestBudgetBytes;
  }
}
