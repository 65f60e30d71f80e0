package dev.lms4j.tf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Objects;
import org.tensorflow.proto.GraphDef;

/**
 * A training GraphDef together with the {@link Manifest} that says how to run it.
 *
 * @param graphDef the graph
 * @param manifest feeds, loss, train op and init op
 */
public record TrainingGraph(GraphDef graphDef, Manifest manifest) {
  public TrainingGraph {
    Objects.requireNonNull(graphDef);
    Objects.requireNonNull(manifest);
  }

  /**
   * Loads a graph (a binary GraphDef file, or a SavedModel directory: its first meta graph) and a
   * manifest file and {@linkplain #validate() checks} them; bad input gives
   * IllegalArgumentException.
   */
  public static TrainingGraph load(Path graph, Path manifestJson) throws IOException {
    Manifest m = Manifest.read(manifestJson);
    TrainingGraph tg = new TrainingGraph(GraphDefs.readAny(graph, null), m);
    tg.validate();
    return tg;
  }

  /**
   * Checks the graph and the manifest against it ({@link GraphChecks}): every input, feed, loss,
   * train op, init op and metric names something the graph has.
   *
   * @return this
   * @throws IllegalArgumentException naming the first problem found
   */
  public TrainingGraph validate() {
    GraphChecks.check(graphDef, manifest);
    return this;
  }

  /** Writes the graph as a binary GraphDef and the manifest as JSON. */
  public void write(Path graphPb, Path manifestJson) throws IOException {
    Files.write(graphPb, graphDef.toByteArray());
    manifest.write(manifestJson);
  }
}
