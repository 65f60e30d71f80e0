package dev.lms4j.tf;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;

/**
 * Describes how to train an exported GraphDef: its feeds (with how to synthesise them), the loss
 * tensor, the training op and the initializer op. The JSON form is the contract of DESIGN.md:
 *
 * <pre>{@code
 * {"feeds":[{"name":"x","dtype":"float32","shape":[16,64],"fill":"normal"}],
 *  "loss":"loss:0", "train_op":"train_op", "init":"init"}
 * }</pre>
 *
 * Unknown keys are ignored. An integer feed with {@code "fill":"ids", "max":N} is filled with
 * seeded ids drawn uniformly from {@code [0, N)} (token or embedding ids); other fills of an
 * integer feed give {@code round(10 x value)}. {@code loss} is a tensor name ({@code :0} implied); {@code train_op}
 * and {@code init} are op names. An optional {@code "metrics": {"accuracy": "accuracy:0"}} names
 * scalar tensors a trainer reports and evaluates besides the loss.
 *
 * @param feeds     feeds, in the order given
 * @param loss      loss tensor name, always with an output index
 * @param trainOp   training op name
 * @param init      initializer op name, or null when the graph needs none
 * @param metrics   metric name to scalar tensor name (with index), in order; may be empty
 */
public record Manifest(List<Feed> feeds, String loss, String trainOp, String init,
    java.util.Map<String, String> metrics) {

  /** A manifest without metrics. */
  public Manifest(List<Feed> feeds, String loss, String trainOp, String init) {
    this(feeds, loss, trainOp, init, java.util.Map.of());
  }

  /** The fills a synthetic feed may use. */
  public static final Set<String> FILLS = Set.of("normal", "uniform", "zeros", "onehot", "ids");

  /** The dtypes a feed may have. */
  public static final Set<String> DTYPES = Set.of("float32", "float64", "int32", "int64");

  /**
   * One feed.
   *
   * @param name  placeholder name (op name, or tensor name with index)
   * @param dtype one of {@link #DTYPES}
   * @param shape static shape; {@code -1} is not allowed here
   * @param fill  one of {@link #FILLS}; {@code ids} (integer feeds only) draws seeded ids
   *              uniformly from {@code [0, max)}
   * @param max   for fill {@code ids}: the number of ids (at least 1); 0 for other fills
   */
  public record Feed(String name, String dtype, long[] shape, String fill, long max) {

    /** A feed whose fill needs no {@code max}. */
    public Feed(String name, String dtype, long[] shape, String fill) {
      this(name, dtype, shape, fill, 0);
    }

    /** An integer feed of seeded ids in {@code [0, max)}. */
    public static Feed ids(String name, String dtype, long[] shape, long max) {
      return new Feed(name, dtype, shape, "ids", max);
    }

    public Feed {
      Objects.requireNonNull(name, "feed name");
      if (!DTYPES.contains(dtype)) {
        throw new IllegalArgumentException("feed '" + name + "': unsupported dtype '" + dtype
            + "' (expected one of " + sorted(DTYPES) + ")");
      }
      if (!FILLS.contains(fill)) {
        throw new IllegalArgumentException("feed '" + name + "': unknown fill '" + fill
            + "' (expected one of " + sorted(FILLS) + ")");
      }
      if (fill.equals("ids")) {
        if (!dtype.startsWith("int")) {
          throw new IllegalArgumentException("feed '" + name + "': fill \"ids\" needs an int32 "
              + "or int64 feed, not " + dtype);
        }
        if (max < 1) {
          throw new IllegalArgumentException("feed '" + name + "': fill \"ids\" needs \"max\" "
              + ">= 1 (ids are drawn from [0, max))");
        }
        if (dtype.equals("int32") && max - 1 > Integer.MAX_VALUE) {
          throw new IllegalArgumentException("feed '" + name + "': \"max\" " + max
              + " does not fit an int32 feed");
        }
      } else if (max != 0) {
        throw new IllegalArgumentException("feed '" + name + "': \"max\" only goes with fill "
            + "\"ids\"");
      }
      long elements = 1;
      for (long d : shape) {
        if (d < 0) {
          throw new IllegalArgumentException("feed '" + name + "': shape dimensions must be >= 0");
        }
        if (d > 0 && elements > Long.MAX_VALUE / 8 / d) {
          throw new IllegalArgumentException("feed '" + name + "': the shape "
              + java.util.Arrays.toString(shape) + " is too large");
        }
        elements *= d;
      }
      shape = shape.clone();
    }

    /** Number of elements. */
    public long elements() {
      long n = 1;
      for (long d : shape) {
        n *= d;
      }
      return n;
    }

    /** The first dimension, taken as the batch size. */
    public long batch() {
      return shape.length == 0 ? 1 : shape[0];
    }

    @Override
    public long[] shape() {
      return shape.clone();
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Feed f && f.name.equals(name) && f.dtype.equals(dtype)
          && java.util.Arrays.equals(f.shape, shape) && f.fill.equals(fill) && f.max == max;
    }

    @Override
    public int hashCode() {
      return Objects.hash(name, dtype, java.util.Arrays.hashCode(shape), fill, max);
    }
  }

  private static final ObjectMapper JSON =
      new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

  public Manifest {
    feeds = List.copyOf(feeds);
    Objects.requireNonNull(loss, "manifest needs \"loss\"");
    Objects.requireNonNull(trainOp, "manifest needs \"train_op\"");
    loss = loss.contains(":") ? loss : loss + ":0";
    java.util.Map<String, String> m = new java.util.LinkedHashMap<>();
    (metrics == null ? java.util.Map.<String, String>of() : metrics).forEach((k, v) ->
        m.put(k, v.contains(":") ? v : v + ":0"));
    metrics = java.util.Collections.unmodifiableMap(m);
  }

  /** The feeds' static shapes by feed name, for shape inference. */
  public java.util.Map<String, long[]> feedShapes() {
    java.util.Map<String, long[]> shapes = new java.util.LinkedHashMap<>();
    for (Feed f : feeds) {
      shapes.put(f.name(), f.shape());
    }
    return shapes;
  }

  /** What a training step runs: the loss, the train op and the metrics, in that order. */
  public java.util.Set<String> runOps() {
    java.util.Set<String> ops = new java.util.LinkedHashSet<>();
    ops.add(loss);
    ops.add(trainOp);
    ops.addAll(metrics.values());
    return ops;
  }

  /** The batch size: the first dimension of the first feed. */
  public long batchSize() {
    return feeds.isEmpty() ? 1 : feeds.get(0).batch();
  }

  /** Parses the manifest JSON; throws {@link IllegalArgumentException} with a clear message. */
  public static Manifest parse(String json) {
    JsonNode root;
    try {
      root = JSON.readTree(json);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("manifest is not valid JSON: " + e.getOriginalMessage());
    }
    if (root == null || !root.isObject()) {
      throw new IllegalArgumentException("manifest must be a JSON object");
    }
    JsonNode feedsNode = root.get("feeds");
    if (feedsNode == null || !feedsNode.isArray()) {
      throw new IllegalArgumentException("manifest needs \"feeds\": an array (may be empty)");
    }
    List<Feed> feeds = new ArrayList<>();
    for (JsonNode f : feedsNode) {
      String name = text(f, "name", null);
      if (name == null) {
        throw new IllegalArgumentException("manifest: every feed needs a \"name\"");
      }
      JsonNode shapeNode = f.get("shape");
      if (shapeNode == null || !shapeNode.isArray()) {
        throw new IllegalArgumentException("feed '" + name + "' needs \"shape\": an array of ints");
      }
      long[] shape = new long[shapeNode.size()];
      for (int i = 0; i < shape.length; i++) {
        JsonNode d = shapeNode.get(i);
        if (!d.isIntegralNumber() || !d.canConvertToLong()) {
          throw new IllegalArgumentException("feed '" + name + "': shape must hold whole "
              + "numbers, not " + d);
        }
        shape[i] = d.asLong();
      }
      JsonNode maxNode = f.get("max");
      if (maxNode != null && !maxNode.isNull() && !maxNode.canConvertToLong()) {
        throw new IllegalArgumentException("feed '" + name + "': \"max\" must be an integer");
      }
      feeds.add(new Feed(name, text(f, "dtype", "float32").toLowerCase(Locale.ROOT), shape,
          text(f, "fill", "normal").toLowerCase(Locale.ROOT),
          maxNode == null || maxNode.isNull() ? 0 : maxNode.asLong()));
    }
    String loss = text(root, "loss", null);
    String trainOp = text(root, "train_op", null);
    if (loss == null) {
      throw new IllegalArgumentException("manifest needs \"loss\" (a tensor name such as loss:0)");
    }
    if (trainOp == null) {
      throw new IllegalArgumentException("manifest needs \"train_op\" (an op name)");
    }
    java.util.Map<String, String> metrics = new java.util.LinkedHashMap<>();
    JsonNode mn = root.get("metrics");
    if (mn != null && !mn.isNull()) {
      if (!mn.isObject()) {
        throw new IllegalArgumentException("manifest \"metrics\" must be an object of name: "
            + "tensor");
      }
      mn.fields().forEachRemaining(e -> metrics.put(e.getKey(), e.getValue().asText()));
    }
    return new Manifest(feeds, loss, trainOp, text(root, "init", null), metrics);
  }

  /** Reads and parses a manifest file. */
  public static Manifest read(Path path) throws IOException {
    if (Files.isDirectory(path)) {
      throw new IllegalArgumentException("manifest " + path + " is a directory, not a JSON file");
    }
    if (Files.exists(path) && !Files.isReadable(path)) {
      throw new IllegalArgumentException("manifest " + path + " cannot be read (permission "
          + "denied)");
    }
    try {
      return parse(Files.readString(path));
    } catch (java.nio.charset.CharacterCodingException e) {
      throw new IllegalArgumentException("manifest " + path + " is not UTF-8 text (is it a "
          + "binary file?)");
    }
  }

  /** The manifest as JSON. */
  public String toJson() {
    ObjectNode root = JSON.createObjectNode();
    ArrayNode fs = root.putArray("feeds");
    for (Feed f : feeds) {
      ObjectNode n = fs.addObject();
      n.put("name", f.name()).put("dtype", f.dtype());
      ArrayNode s = n.putArray("shape");
      for (long d : f.shape) {
        s.add(d);
      }
      n.put("fill", f.fill());
      if (f.max() != 0) {
        n.put("max", f.max());
      }
    }
    root.put("loss", loss).put("train_op", trainOp);
    if (init != null) {
      root.put("init", init);
    }
    if (!metrics.isEmpty()) {
      ObjectNode mn = root.putObject("metrics");
      metrics.forEach(mn::put);
    }
    try {
      return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Writes the manifest as JSON. */
  public void write(Path path) throws IOException {
    Files.writeString(path, toJson());
  }

  private static String text(JsonNode n, String key, String dflt) {
    JsonNode v = n.get(key);
    return v == null || v.isNull() ? dflt : v.asText();
  }

  private static List<String> sorted(Set<String> s) {
    return s.stream().sorted().toList();
  }
}
