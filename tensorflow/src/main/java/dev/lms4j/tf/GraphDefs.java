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

  /**
   * Reads a GraphDef from a {@code .pb} file, or from a SavedModel directory (its
   * {@code saved_model.pb}, the meta graph tagged {@code tag}, or the first one when
   * {@code tag} is null). Variables are not loaded: only the graph is needed to plan and rewrite.
   */
  public static GraphDef readAny(Path path, String tag) throws IOException {
    if (!Files.isDirectory(path)) {
      return read(path);
    }
    Path sm = path.resolve("saved_model.pb");
    if (!Files.isRegularFile(sm)) {
      throw new IllegalArgumentException(path + " is a directory without saved_model.pb "
          + "(expected a GraphDef file or a SavedModel directory)");
    }
    org.tensorflow.proto.SavedModel model;
    try {
      model = org.tensorflow.proto.SavedModel.parseFrom(Files.readAllBytes(sm));
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException(sm + " is not a SavedModel: " + e.getMessage());
    }
    for (org.tensorflow.proto.MetaGraphDef mg : model.getMetaGraphsList()) {
      if (tag == null || mg.getMetaInfoDef().getTagsList().contains(tag)) {
        if (mg.getGraphDef().getNodeCount() == 0) {
          throw new IllegalArgumentException(sm + ": the meta graph holds no nodes");
        }
        return mg.getGraphDef();
      }
    }
    throw new IllegalArgumentException(sm + " has no meta graph tagged '" + tag + "'");
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

  /** Grappler's manual swap annotation: a node attribute listing the input indices to swap. */
  public static final String SWAP_TO_HOST_ATTR = "_swap_to_host";

  /**
   * The inputs marked for swapping with {@value #SWAP_TO_HOST_ATTR} (a list of ints, or one int),
   * by consumer node name.
   *
   * @throws IllegalArgumentException when the attribute holds something other than ints
   */
  public static java.util.Map<String, java.util.Set<Integer>> swapToHost(GraphDef gd) {
    java.util.Map<String, java.util.Set<Integer>> out = new java.util.TreeMap<>();
    for (org.tensorflow.proto.NodeDef n : gd.getNodeList()) {
      org.tensorflow.proto.AttrValue a = n.getAttrMap().get(SWAP_TO_HOST_ATTR);
      if (a == null) {
        continue;
      }
      java.util.Set<Integer> idx = new java.util.TreeSet<>();
      if (a.getValueCase() == org.tensorflow.proto.AttrValue.ValueCase.I) {
        idx.add((int) a.getI());
      } else if (a.getValueCase() == org.tensorflow.proto.AttrValue.ValueCase.LIST
          && a.getList().getSCount() == 0 && a.getList().getFCount() == 0) {
        a.getList().getIList().forEach(i -> idx.add(i.intValue()));
      } else {
        throw new IllegalArgumentException(SWAP_TO_HOST_ATTR + " of " + n.getName()
            + " must list input indices (ints)");
      }
      out.put(n.getName(), idx);
    }
    return out;
  }
}
