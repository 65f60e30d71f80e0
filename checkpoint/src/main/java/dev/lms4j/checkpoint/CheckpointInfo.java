package dev.lms4j.checkpoint;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * One complete checkpoint as a backend lists it.
 *
 * <pre>{@code
 * CheckpointInfo c = backend.latest().orElseThrow();
 * c.step();                                  // 1200
 * c.metadata().get("loss");                  // whatever the saver put there
 * c.tensor("w0").map(TensorSpec::shape);     // [784, 256]
 * }</pre>
 *
 * @param step the training step it was taken at
 * @param metadata free-form key/value pairs saved with it (sorted by key)
 * @param tensors what it holds, in save order; empty when the backend cannot tell without
 *     reading the data (a foreign TensorFlow checkpoint)
 * @param location where it lives (a directory, a TensorFlow prefix, ...), for messages
 */
public record CheckpointInfo(long step, Map<String, String> metadata, List<TensorSpec> tensors,
    String location) {

  /** Validates and freezes the fields. */
  public CheckpointInfo {
    if (step < 0) {
      throw new IllegalArgumentException("step must be >= 0, got " + step);
    }
    metadata = Collections.unmodifiableMap(new TreeMap<>(metadata));
    tensors = List.copyOf(tensors);
    Objects.requireNonNull(location, "location");
  }

  /** The spec of the tensor named {@code name}, if this checkpoint lists it. */
  public Optional<TensorSpec> tensor(String name) {
    return tensors.stream().filter(t -> t.name().equals(name)).findFirst();
  }

  /** The total size of the listed tensors in bytes. */
  public long byteSize() {
    return tensors.stream().mapToLong(TensorSpec::byteSize).sum();
  }
}
