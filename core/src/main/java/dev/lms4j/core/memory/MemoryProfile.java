package dev.lms4j.core.memory;

/**
 * The result of a {@link MemorySimulator} run.
 *
 * @param order       the simulated op order
 * @param timeline    bytes in use while the op at each position of {@code order} runs
 * @param peakBytes   the highest sample (at least {@code pinnedBytes})
 * @param peakAt      position in {@code order} of the peak, -1 when pinned memory is the peak
 * @param pinnedBytes variables, constants and feeds, resident for the whole step
 */
public record MemoryProfile(int[] order, long[] timeline, long peakBytes, int peakAt,
    long pinnedBytes) {}
