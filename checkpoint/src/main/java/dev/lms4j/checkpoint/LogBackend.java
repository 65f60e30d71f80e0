package dev.lms4j.checkpoint;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The {@code log} backend: logs each tensor's name, size and address (TMCI's dummy plugin). */
final class LogBackend implements CheckpointBackend {
  static final String NAME = "log";
  private static final Logger LOG = LoggerFactory.getLogger(LogBackend.class);
  private final boolean debug;

  LogBackend(boolean debug) {
    this.debug = debug;
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public CheckpointInfo save(long step, Map<String, String> metadata, List<TensorView> tensors) {
    FilesBackend.checkUniqueNames(tensors);
    long total = 0;
    for (TensorView v : tensors) {
      String line = String.format(Locale.ROOT, "checkpoint step %d: tensor %s %s%s %d bytes at %s",
          step, v.name(), v.dtype(), java.util.Arrays.toString(v.shape()), v.byteSize(),
          v.address() == 0 ? "heap" : String.format(Locale.ROOT, "0x%x", v.address()));
      if (debug) {
        LOG.debug(line);
      } else {
        LOG.info(line);
      }
      total += v.byteSize();
    }
    String summary = String.format(Locale.ROOT, "checkpoint step %d: %d tensors, %d bytes, "
        + "metadata %s", step, tensors.size(), total, new java.util.TreeMap<>(metadata));
    if (debug) {
      LOG.debug(summary);
    } else {
      LOG.info(summary);
    }
    return new CheckpointInfo(step, metadata, tensors.stream().map(TensorView::spec).toList(),
        "log");
  }

  @Override
  public void load(CheckpointInfo checkpoint, List<TensorView> targets) {
    throw new UnsupportedOperationException("the 'log' checkpoint backend only prints tensors; "
        + "it cannot load a checkpoint (use 'files' or 'tf')");
  }

  @Override
  public List<CheckpointInfo> list() {
    return List.of();
  }

  @Override
  public void close() {
    // nothing held
  }
}
