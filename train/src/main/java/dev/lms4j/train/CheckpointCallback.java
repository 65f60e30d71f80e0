package dev.lms4j.train;

import dev.lms4j.checkpoint.AsyncCheckpointer;
import dev.lms4j.checkpoint.CheckpointBackend;
import dev.lms4j.checkpoint.CheckpointInfo;
import dev.lms4j.checkpoint.Checkpoints;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Checkpoints the model (and, when asked, the optimizer state) during training through a
 * {@link CheckpointBackend}, every N batches or every N epochs, and resumes from the newest
 * complete checkpoint when asked.
 *
 * <pre>{@code
 * CheckpointBackend files = CheckpointBackends.open("files", "dir=/tmp/ckpt,keep=3");
 * try (CheckpointCallback ckpt = CheckpointCallback.builder(files).everyEpochs(1)
 *     .optimizerState(true).resume(true).build()) {
 *   trainer.fit(train, 5, ckpt);
 * }
 * }</pre>
 *
 * Checkpoints carry the global step and the epoch in their metadata, and a checkpoint taken
 * inside an epoch also the step within it and the epoch's loss and metric sums so far. A resumed
 * run continues exactly where the checkpoint was taken (the same batches follow, the step counter
 * goes on), so with optimizer state it reaches the same losses as an uninterrupted run, bit for
 * bit; a checkpoint after an epoch's last step counts that epoch as complete. Optimizer state is every variable under the
 * {@code train/} scope (the zoo's convention for slots such as momentum accumulators).
 * With {@code async}, saves take a snapshot and write in the background
 * ({@link AsyncCheckpointer}); errors surface at the next save or at the end of training.
 * Close it (it closes the asynchronous writer, not the backend).
 */
public final class CheckpointCallback implements Callback, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(CheckpointCallback.class);
  /** Scope of optimizer state in the zoo's graphs. */
  public static final String OPTIMIZER_SCOPE = "train/";

  private final CheckpointBackend backend;
  private final int everyBatches;
  private final int everyEpochs;
  private final boolean optimizerState;
  private final boolean resume;
  private final AsyncCheckpointer async;
  private Trainer trainer;
  private List<String> variables;
  private long globalStep;
  private int epoch;
  private int stepsPerEpoch;
  private CheckpointInfo resumedFrom;
  private final List<String> skipped = new java.util.ArrayList<>();
  private boolean closed;

  private CheckpointCallback(Builder b) {
    this.backend = b.backend;
    this.everyBatches = b.everyBatches;
    this.everyEpochs = b.everyEpochs;
    this.optimizerState = b.optimizerState;
    this.resume = b.resume;
    this.async = b.async ? AsyncCheckpointer.builder(backend).build() : null;
  }

  /** A builder; choose everyBatches or everyEpochs. */
  public static Builder builder(CheckpointBackend backend) {
    return new Builder(backend);
  }

  /**
   * The epoch the newest complete checkpoint was taken after (0 when there is none): a caller
   * that wants {@code N} epochs in all trains {@code N - latestEpoch()} more when resuming.
   */
  public int latestEpoch() {
    try {
      return backend.latest().map(c -> Integer.parseInt(c.metadata().getOrDefault("epoch", "0")))
          .orElse(0);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list checkpoints of " + backend, e);
    }
  }

  /** The checkpoint training resumed from, if any. */
  public Optional<CheckpointInfo> resumedFrom() {
    return Optional.ofNullable(resumedFrom);
  }

  /**
   * The newer checkpoints the resume skipped because they could not be loaded (a flipped byte,
   * a truncated file), each as {@code location: reason}; empty when the newest one loaded.
   */
  public List<String> skipped() {
    return List.copyOf(skipped);
  }

  /** The variables saved, once the session has started. */
  public List<String> variables() {
    return variables == null ? List.of() : variables;
  }

  @Override
  public void onSessionStart(Trainer t) {
    this.trainer = t;
    List<String> all = Checkpoints.variables(t.graph());
    variables = optimizerState ? all
        : all.stream().filter(v -> !v.startsWith(OPTIMIZER_SCOPE)).toList();
    if (!resume) {
      return;
    }
    try {
      List<CheckpointInfo> saves = backend.list();
      if (saves.isEmpty()) {
        LOG.info("no checkpoint to resume from in {}; starting from scratch", backend);
        return;
      }
      CheckpointInfo c = null;
      List<String> saved = List.of();
      // the newest checkpoint that loads; a damaged one is named and skipped
      for (int i = saves.size() - 1; i >= 0 && c == null; i--) {
        CheckpointInfo candidate = saves.get(i);
        // a checkpoint that does not list its tensors (a foreign TF one) is tried whole
        List<String> matching = candidate.tensors().isEmpty() ? variables : variables.stream()
            .filter(v -> candidate.tensor(v).isPresent()).toList();
        if (matching.isEmpty()) {
          throw new IllegalArgumentException("checkpoint " + candidate.location() + " matches "
              + "none of the model's " + variables.size() + " variables (it holds "
              + candidate.tensors().size() + " tensors, e.g. '"
              + (candidate.tensors().isEmpty() ? "" : candidate.tensors().get(0).name())
              + "'): it was written by another model");
        }
        try {
          Checkpoints.load(t.session(), matching, candidate, backend);
          c = candidate;
          saved = matching;
        } catch (IOException e) {
          String why = String.valueOf(e.getMessage()).replaceAll("\\s+", " ");
          skipped.add(candidate.location() + ": " + why);
          LOG.warn("checkpoint {} (step {}) cannot be loaded: {}; {}", candidate.location(),
              candidate.step(), why, i > 0 ? "falling back to the previous one"
                  : "no older checkpoint left");
        }
      }
      if (c == null) {
        throw new IOException("none of the " + saves.size() + " checkpoints in " + backend
            + " can be loaded (see the warnings above)");
      }
      resumedFrom = c;
      globalStep = c.step();
      int epochs = Integer.parseInt(c.metadata().getOrDefault("epoch", "0"));
      int steps = Integer.parseInt(c.metadata().getOrDefault("batch", "0"));
      t.resumeAfter(epochs, steps, sums(c.metadata().get("sums")));
      LOG.info("resumed from checkpoint {} (step {}, epoch {}{}, {} of {} variables)",
          c.location(), c.step(), epochs, steps > 0 ? " and " + steps + " steps of the next"
              : "", saved.size(), variables.size());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot resume from " + backend, e);
    }
  }

  @Override
  public void onTrainBegin(FitInfo info) {
    stepsPerEpoch = info.stepsPerEpoch();
  }

  @Override
  public void onEpochBegin(int e) {
    epoch = e;
  }

  @Override
  public void onBatchEnd(int batch, Logs logs) {
    globalStep++;
    if (everyBatches > 0 && globalStep % everyBatches == 0) {
      if (batch >= stepsPerEpoch) {
        // the epoch's last step: the epoch is complete
        save(Map.of("epoch", Integer.toString(epoch)));
      } else {
        // where inside the epoch, with the epoch's sums so far, for an exact resume
        save(Map.of("epoch", Integer.toString(epoch - 1), "batch", Integer.toString(batch),
            "sums", sums(trainer.epochSums())));
      }
    }
  }

  /** Doubles as exact hexadecimal literals, comma-separated. */
  private static String sums(double[] v) {
    StringBuilder b = new StringBuilder();
    for (double d : v) {
      b.append(b.length() == 0 ? "" : ",").append(Double.toHexString(d));
    }
    return b.toString();
  }

  private static double[] sums(String s) {
    if (s == null || s.isEmpty()) {
      return null;
    }
    String[] f = s.split(",");
    double[] v = new double[f.length];
    for (int i = 0; i < f.length; i++) {
      v[i] = Double.parseDouble(f[i]);
    }
    return v;
  }

  @Override
  public void onEpochEnd(int e, Logs logs) {
    if (everyEpochs > 0 && e % everyEpochs == 0) {
      save(Map.of("epoch", Integer.toString(e)));
    }
  }

  @Override
  public void onTrainEnd(Logs logs) {
    if (async != null) {
      try {
        async.await();
      } catch (IOException e) {
        throw new UncheckedIOException("the last asynchronous checkpoint failed", e);
      }
    }
  }

  private void save(Map<String, String> meta) {
    try {
      if (async != null) {
        async.save(trainer.session(), variables, globalStep, meta);
      } else {
        CheckpointInfo c = Checkpoints.save(trainer.session(), variables, globalStep, meta,
            backend);
        LOG.debug("checkpoint {} at step {}", c.location(), c.step());
      }
    } catch (IOException e) {
      throw new UncheckedIOException("checkpoint at step " + globalStep + " failed", e);
    }
  }

  @Override
  public void close() throws IOException {
    if (!closed) {
      closed = true;
      if (async != null) {
        async.close();
      }
    }
  }

  /** Builder for {@link CheckpointCallback}. */
  public static final class Builder {
    private final CheckpointBackend backend;
    private int everyBatches;
    private int everyEpochs;
    private boolean optimizerState = true;
    private boolean resume;
    private boolean async;

    private Builder(CheckpointBackend backend) {
      this.backend = Objects.requireNonNull(backend);
    }

    /** Save every {@code n} batches (steps). */
    public Builder everyBatches(int n) {
      if (n < 1) {
        throw new IllegalArgumentException("checkpoint frequency must be >= 1");
      }
      everyBatches = n;
      return this;
    }

    /** Save every {@code n} epochs. */
    public Builder everyEpochs(int n) {
      if (n < 1) {
        throw new IllegalArgumentException("checkpoint frequency must be >= 1");
      }
      everyEpochs = n;
      return this;
    }

    /** Include optimizer state (default true: needed for an exact resume). */
    public Builder optimizerState(boolean b) {
      optimizerState = b;
      return this;
    }

    /** Resume from the newest complete checkpoint when the session starts. */
    public Builder resume(boolean b) {
      resume = b;
      return this;
    }

    /** Snapshot, then write in the background. */
    public Builder async(boolean b) {
      async = b;
      return this;
    }

    /** The callback. */
    public CheckpointCallback build() {
      if (everyBatches == 0 && everyEpochs == 0) {
        throw new IllegalArgumentException("say how often: everyBatches(n) or everyEpochs(n)");
      }
      return new CheckpointCallback(this);
    }
  }
}
