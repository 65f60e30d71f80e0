package dev.lms4j.tf;

import com.google.protobuf.InvalidProtocolBufferException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.tensorflow.proto.GraphDef;

/** Reading GraphDef files with clear errors. */
public final class GraphDefs {
  private GraphDefs() {}

  /**
   * Reads a binary GraphDef ({@code .pb}).
   *
   * @throws IllegalArgumentException when the file is not a GraphDef (or is empty)
   * @throws IOException when the file cannot be read
   */
  public static GraphDef read(Path path) throws IOException {
    byte[] bytes = Files.readAllBytes(path);
    return parse(bytes, path.toString());
  }

  /** Parses a binary GraphDef; {@code what} names the source in error messages. */
  public static GraphDef parse(byte[] bytes, String what) {
    GraphDef g;
    try {
      g = GraphDef.parseFrom(bytes);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException(what + " is not a binary GraphDef: " + e.getMessage());
    }
    if (g.getNodeCount() == 0) {
      throw new IllegalArgumentException(what + " holds no GraphDef nodes (empty or not a GraphDef)");
    }
    return g;
  }
}
