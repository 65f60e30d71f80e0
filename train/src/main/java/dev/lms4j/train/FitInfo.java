package dev.lms4j.train;

/**
 * What a {@link Trainer#fit} call is about to do, given to {@link Callback#onTrainBegin}.
 * Epochs are numbered from 1 over the trainer's life: a second {@code fit} call continues the
 * numbering where the first one stopped.
 *
 * <pre>{@code
 * public void onTrainBegin(FitInfo info) {
 *   log.info("epochs {}..{}, {} steps each", info.firstEpoch(), info.lastEpoch(),
 *       info.stepsPerEpoch());
 * }
 * }</pre>
 *
 * @param firstEpoch    the number of the first epoch of this call (1-based)
 * @param lastEpoch     the number of its last epoch
 * @param stepsPerEpoch steps (batches) per epoch
 * @param batchSize     samples per step
 */
public record FitInfo(int firstEpoch, int lastEpoch, int stepsPerEpoch, int batchSize) {

  /**
   * The number of epochs of this call.
   *
   * @return {@code lastEpoch - firstEpoch + 1}
   */
  public int epochs() {
    return lastEpoch - firstEpoch + 1;
  }
}
