package dev.lms4j.checkpoint;

import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;

/**
 * Checkpoints in two phases, as CheckFreq does: a <em>snapshot</em> in the caller's thread copies
 * the variables into host memory (one {@code memcpy} per tensor, into snapshot tensors reused from
 * one checkpoint to the next), then a background thread <em>writes</em> the snapshot through the
 * backend while training goes on.
 *
 * <p>Memory is bounded: at most {@link Builder#maxPending(int)} snapshots exist at once (default
 * 1: the previous checkpoint must be written before the next snapshot is taken) and at most
 * {@link Builder#maxSnapshotBytes(long)} bytes. When a new snapshot would exceed either bound,
 * {@link WhenBusy#BLOCK} waits for the oldest pending write and {@link WhenBusy#SKIP} skips this
 * checkpoint ({@code save} returns false).
 *
 * <p>A failed background write is reported by the next call to {@code save}, {@link #await()} or
 * {@link #close()}, which throws an {@link IOException} naming the step. {@code close()} waits for
 * the pending writes and frees the snapshots; it must be called (the snapshots are native
 * memory) and is idempotent. It does not close the backend. The backend must not be written by
 * anyone else meanwhile.
 *
 * <pre>{@code
 * try (CheckpointBackend b = CheckpointBackends.open("files", "dir=/tmp/ckpt,keep=3");
 *      AsyncCheckpointer ckpt = AsyncCheckpointer.builder(b).whenBusy(WhenBusy.SKIP).build()) {
 *   for (long step = 1; step <= steps; step++) {
 *     session.run(trainOp);
 *     if (step % 100 == 0) {
 *       ckpt.save(session, vars, step, Map.of());   // returns after the snapshot
 *     }
 *   }
 * }                                                 // waits for the last write
 * }</pre>
 */
public final class AsyncCheckpointer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(AsyncCheckpointer.class);

  /** What {@code save} does when the snapshot bounds are reached. */
  public enum WhenBusy {
    /** Wait until pending writes have freed enough room. */
    BLOCK,
    /** Skip this checkpoint: {@code save} returns false at once. */
    SKIP
  }

  /** Options of an {@link AsyncCheckpointer}. */
  public static final class Builder {
    private final CheckpointBackend backend;
    private int maxPending = 1;
    private long maxSnapshotBytes = Long.MAX_VALUE;
    private WhenBusy whenBusy = WhenBusy.BLOCK;

    private Builder(CheckpointBackend backend) {
      this.backend = Objects.requireNonNull(backend, "backend");
    }

    /**
     * How many snapshots may exist at once (taken and not yet written), default 1.
     *
     * @throws IllegalArgumentException when below 1
     */
    public Builder maxPending(int n) {
      if (n < 1) {
        throw new IllegalArgumentException("maxPending must be >= 1, got " + n);
      }
      this.maxPending = n;
      return this;
    }

    /**
     * The most host memory the snapshots may hold, in bytes (default unbounded). A single
     * snapshot larger than this is refused with an {@link IllegalArgumentException}.
     *
     * @throws IllegalArgumentException when below 1
     */
    public Builder maxSnapshotBytes(long bytes) {
      if (bytes < 1) {
        throw new IllegalArgumentException("maxSnapshotBytes must be >= 1, got " + bytes);
      }
      this.maxSnapshotBytes = bytes;
      return this;
    }

    /** What to do when the bounds are reached (default {@link WhenBusy#BLOCK}). */
    public Builder whenBusy(WhenBusy w) {
      this.whenBusy = Objects.requireNonNull(w, "whenBusy");
      return this;
    }

    /** The checkpointer; it starts one background writer thread. */
    public AsyncCheckpointer build() {
      return new AsyncCheckpointer(this);
    }
  }

  /** A builder writing through {@code backend}. */
  public static Builder builder(CheckpointBackend backend) {
    return new Builder(backend);
  }

  /** Host copies of one checkpoint's tensors (reused once written). */
  private static final class Snapshot {
    final String layout;
    final List<Tensor> tensors;
    final List<TensorView> views;
    final long bytes;

    Snapshot(String layout, List<Tensor> tensors, List<TensorView> views, long bytes) {
      this.layout = layout;
      this.tensors = tensors;
      this.views = views;
      this.bytes = bytes;
    }

    void free() {
      tensors.forEach(Tensor::close);
    }
  }

  private final CheckpointBackend backend;
  private final int maxPending;
  private final long maxBytes;
  private final WhenBusy whenBusy;
  private final ExecutorService writer;
  private final Object lock = new Object();
  // guarded by lock
  private int pending;
  private long pendingBytes;
  private final Deque<Snapshot> free = new ArrayDeque<>();
  private IOException failure;
  private CheckpointInfo lastSaved;
  private long skipped;
  private boolean closed;

  private AsyncCheckpointer(Builder b) {
    this.backend = b.backend;
    this.maxPending = b.maxPending;
    this.maxBytes = b.maxSnapshotBytes;
    this.whenBusy = b.whenBusy;
    this.writer = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "lms4j-async-checkpoint");
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Snapshots {@code variables} of {@code session} and writes them in the background as the
   * checkpoint of {@code step}. Returns once the snapshot is taken; training may go on then.
   *
   * @return true when the checkpoint was started, false when skipped ({@link WhenBusy#SKIP})
   * @throws IOException when an earlier background write failed (this checkpoint is not taken)
   * @throws IllegalArgumentException for names that are not variables, or a snapshot larger
   *     than the byte cap
   */
  public boolean save(Session session, List<String> variables, long step,
      Map<String, String> metadata) throws IOException {
    rethrowFailure();
    if (!reserveSlot()) {
      return false;
    }
    boolean submitted = false;
    try {
      try (Checkpoints.Fetched f = Checkpoints.fetch(session, variables)) {
        submitted = snapshotAndSubmit(step, metadata, f.views());
        return submitted;
      }
    } finally {
      if (!submitted) {
        releaseSlot(0);
      }
    }
  }

  /**
   * Snapshots {@code tensors} (copied before this returns; the caller may change or free them
   * afterwards) and writes them in the background as the checkpoint of {@code step}.
   *
   * @return true when the checkpoint was started, false when skipped
   * @throws IOException when an earlier background write failed
   */
  public boolean save(long step, Map<String, String> metadata, List<TensorView> tensors)
      throws IOException {
    rethrowFailure();
    if (!reserveSlot()) {
      return false;
    }
    boolean submitted = false;
    try {
      submitted = snapshotAndSubmit(step, metadata, tensors);
      return submitted;
    } finally {
      if (!submitted) {
        releaseSlot(0);
      }
    }
  }

  /** Takes a pending slot (count bound), blocking or skipping; false when skipped. */
  private boolean reserveSlot() throws IOException {
    synchronized (lock) {
      checkOpen();
      while (pending >= maxPending) {
        if (whenBusy == WhenBusy.SKIP) {
          skipped++;
          LOG.debug("checkpoint skipped: a snapshot is still being written");
          return false;
        }
        waitLocked();
      }
      pending++;
      return true;
    }
  }

  private void releaseSlot(long bytes) {
    synchronized (lock) {
      pending--;
      pendingBytes -= bytes;
      lock.notifyAll();
    }
  }

  private void waitLocked() throws IOException {
    try {
      lock.wait();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while waiting for a pending checkpoint write", e);
    }
  }

  private boolean snapshotAndSubmit(long step, Map<String, String> metadata,
      List<TensorView> tensors) throws IOException {
    FilesBackend.checkUniqueNames(tensors);
    long bytes = tensors.stream().mapToLong(TensorView::byteSize).sum();
    if (bytes > maxBytes) {
      throw new IllegalArgumentException("a snapshot of " + bytes + " bytes exceeds the cap of "
          + maxBytes + " bytes (raise maxSnapshotBytes or save synchronously)");
    }
    synchronized (lock) {
      while (pendingBytes + bytes > maxBytes) {
        if (whenBusy == WhenBusy.SKIP) {
          skipped++;
          LOG.debug("checkpoint of step {} skipped: snapshots would exceed {} bytes", step,
              maxBytes);
          return false;
        }
        waitLocked();
      }
      pendingBytes += bytes;
    }
    Snapshot snap;
    try {
      snap = snapshot(tensors, bytes);
    } catch (RuntimeException e) {
      synchronized (lock) {
        pendingBytes -= bytes;
      }
      throw e;
    }
    Map<String, String> md = Map.copyOf(metadata);
    writer.execute(() -> write(step, md, snap));
    return true;
  }

  private Snapshot snapshot(List<TensorView> tensors, long bytes) {
    StringBuilder key = new StringBuilder();
    for (TensorView v : tensors) {
      key.append(v.name()).append('\u0000').append(v.dtype()).append(Arrays.toString(v.shape()))
          .append('\u0001');
    }
    String layout = key.toString();
    Snapshot snap = null;
    synchronized (lock) {
      for (Snapshot s : free) {
        if (s.layout.equals(layout)) {
          snap = s;
          break;
        }
      }
      if (snap != null) {
        free.remove(snap);
      } else if (free.size() >= maxPending) {
        free.removeFirst().free(); // layout changed: drop the oldest unused snapshot
      }
    }
    if (snap == null) {
      List<Tensor> ts = new ArrayList<>();
      List<TensorView> vs = new ArrayList<>();
      try {
        for (TensorView v : tensors) {
          Tensor t = Tensor.of(v.dtype().tensorClass(), Shape.of(v.shape()));
          ts.add(t);
          vs.add(TensorView.of(v.name(), t));
        }
      } catch (RuntimeException e) {
        ts.forEach(Tensor::close);
        throw e;
      }
      snap = new Snapshot(layout, ts, vs, bytes);
    }
    for (int i = 0; i < tensors.size(); i++) {
      snap.views.get(i).data().put(tensors.get(i).data()); // the snapshot copy
    }
    return snap;
  }

  private void write(long step, Map<String, String> metadata, Snapshot snap) {
    long t0 = System.nanoTime();
    try {
      CheckpointInfo info = backend.save(step, metadata, snap.views);
      LOG.debug("async checkpoint of step {} written in {} ms", step,
          (System.nanoTime() - t0) / 1_000_000);
      synchronized (lock) {
        lastSaved = info;
      }
    } catch (Throwable e) {
      LOG.warn("async checkpoint of step {} failed: {}", step, e.toString());
      synchronized (lock) {
        if (failure == null) {
          failure = new IOException("the background checkpoint of step " + step + " failed: "
              + e.getMessage(), e);
        }
      }
    } finally {
      synchronized (lock) {
        if (closed) {
          snap.free();
        } else {
          free.addLast(snap);
        }
      }
      releaseSlot(snap.bytes);
    }
  }

  /**
   * Waits until every pending write has finished.
   *
   * @throws IOException when a background write failed
   */
  public void await() throws IOException {
    synchronized (lock) {
      while (pending > 0) {
        waitLocked();
      }
    }
    rethrowFailure();
  }

  /** The last checkpoint written completely, if any. */
  public Optional<CheckpointInfo> lastSaved() {
    synchronized (lock) {
      return Optional.ofNullable(lastSaved);
    }
  }

  /** How many checkpoints were skipped ({@link WhenBusy#SKIP}). */
  public long skipped() {
    synchronized (lock) {
      return skipped;
    }
  }

  private void rethrowFailure() throws IOException {
    synchronized (lock) {
      if (failure != null) {
        IOException f = failure;
        failure = null;
        throw f;
      }
    }
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("the AsyncCheckpointer is closed");
    }
  }

  /**
   * Waits for the pending writes, stops the writer thread and frees the snapshots; idempotent.
   *
   * @throws IOException when a background write failed and was not reported yet
   */
  @Override
  public void close() throws IOException {
    synchronized (lock) {
      if (closed) {
        return;
      }
    }
    try {
      synchronized (lock) {
        while (pending > 0) {
          try {
            lock.wait();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            break;
          }
        }
      }
    } finally {
      synchronized (lock) {
        closed = true;
        free.forEach(Snapshot::free);
        free.clear();
      }
      writer.shutdown();
      try {
        writer.awaitTermination(1, TimeUnit.MINUTES);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    rethrowFailure();
  }
}
