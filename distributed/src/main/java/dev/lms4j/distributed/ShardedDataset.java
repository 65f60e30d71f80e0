package dev.lms4j.distributed;

import dev.lms4j.train.data.Batch;
import dev.lms4j.train.data.Dataset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.tensorflow.ndarray.Shape;

/**
 * One worker's share of a data set in data-parallel training. An epoch's order is that of the
 * whole data set in global batches of {@code workers x b} samples (shuffled by the same seed on
 * every worker); worker {@code i} takes samples {@code [i*b, (i+1)*b)} of each global batch. So
 * the union of the workers' step-{@code k} batches is exactly the global batch {@code k} that one
 * worker with batch {@code workers x b} would train on, and the order is fixed by the seed.
 *
 * <p>{@link #size()} is {@code b} times the number of full global batches, so every worker runs the same number of steps; the samples of a last,
 * partial global batch are skipped in that epoch, as the trainer skips a partial batch.
 *
 * <pre>{@code
 * Dataset mine = new ShardedDataset(train, 2, 1, 50);   // worker 1 of 2, batch 50
 * trainer.fit(mine, 3);                                  // global batch 100
 * }</pre>
 */
public final class ShardedDataset implements Dataset {
  private final Dataset whole;
  private final int workers;
  private final int index;
  private final int batch;

  /**
   * A shard.
   *
   * @param whole   the whole data set (the same on every worker)
   * @param workers the number of workers, at least 1
   * @param index   this worker's index, in {@code [0, workers)}
   * @param batch   the per-worker batch size (the graph's), at least 1
   */
  public ShardedDataset(Dataset whole, int workers, int index, int batch) {
    this.whole = Objects.requireNonNull(whole, "data set");
    if (workers < 1 || index < 0 || index >= workers) {
      throw new IllegalArgumentException("worker " + index + " of " + workers + " is not valid");
    }
    if (batch < 1) {
      throw new IllegalArgumentException("batch size must be >= 1, got " + batch);
    }
    this.workers = workers;
    this.index = index;
    this.batch = batch;
  }

  /**
   * The samples this worker trains on per epoch: the per-worker batch times the number of full
   * global batches.
   *
   * @return the shard's size
   */
  @Override
  public int size() {
    return whole.size() / (workers * batch) * batch;
  }

  /**
   * The number of samples of one global batch.
   *
   * @return workers x per-worker batch
   */
  public int globalBatch() {
    return workers * batch;
  }

  @Override
  public List<Shape> sampleShapes() {
    return whole.sampleShapes();
  }

  /**
   * Reads a sample of the whole data set: the indices of this shard's batches are the whole
   * data set's (a shard is a choice of samples per step, not a renumbering).
   *
   * @param component the component index
   * @param sample    a sample index of the whole data set
   * @param dst       the destination
   * @param offset    where the sample starts in {@code dst}
   */
  @Override
  public void read(int component, int sample, float[] dst, int offset) {
    whole.read(component, sample, dst, offset);
  }

  @Override
  public List<Batch> batches(int batchSize, boolean shuffle, long seed) {
    if (batchSize != batch) {
      throw new IllegalArgumentException("this shard is for batch " + batch + ", not "
          + batchSize);
    }
    List<Batch> global = whole.batches(batchSize * workers, shuffle, seed);
    List<Batch> out = new ArrayList<>(global.size());
    for (Batch g : global) {
      if (g.size() < batchSize * workers) {
        break;
      }
      int[] idx = g.indices();
      out.add(Batch.of(whole, Arrays.copyOfRange(idx, index * batchSize,
          (index + 1) * batchSize)));
    }
    return out;
  }

  @Override
  public String toString() {
    return whole + " shard " + index + "/" + workers;
  }
}
