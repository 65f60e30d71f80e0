package dev.lms4j.tf.run;

/**
 * One training step as measured.
 *
 * @param step 1-based step number
 * @param loss the loss fetched in that step
 * @param ms   wall time of the step in milliseconds
 * @param traced true for the step run with {@code FULL_TRACE} (slower: not a timing sample)
 */
public record StepRecord(int step, double loss, double ms, boolean traced) {}
