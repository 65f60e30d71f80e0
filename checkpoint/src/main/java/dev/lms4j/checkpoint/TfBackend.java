package dev.lms4j.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.exceptions.TensorFlowException;
import org.tensorflow.ndarray.NdArrays;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.train.Restore;
import org.tensorflow.types.TString;
import org.tensorflow.types.family.TType;

/**
 * The {@code tf} backend: TensorFlow's own checkpoint format (a tensor bundle:
 * {@code prefix.index} + {@code prefix.data-00000-of-00001}) written by the {@code SaveV2} op and
 * read by {@code RestoreV2}, both built in a private graph and run in a private session.
 *
 * <p>Copies: saving feeds a tensor-backed view's own tensor to {@code SaveV2} (no copy in Java;
 * TensorFlow's writer then copies into its file buffer). A view over a plain buffer is first
 * copied into a new tensor. Loading copies once: {@code RestoreV2} allocates its output
 * tensors, whose bytes are copied into the targets.
 */
final class TfBackend implements CheckpointBackend {
  static final String NAME = "tf";
  static final String FORMAT = "lms4j-tf/1";
  static final String META = "lms4j.json";
  static final String STATE = "checkpoint";
  private static final Logger LOG = LoggerFactory.getLogger(TfBackend.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern STEP_SUFFIX = Pattern.compile(".*-(\\d{1,18})$");

  private final Path root;
  private final int keep;
  private final String prefixName;
  private final boolean fsync;
  private Graph graph;
  private Session session;
  private Ops tf;
  private final Map<String, SaveOps> saves = new HashMap<>();
  private final Map<String, RestoreOps> restores = new HashMap<>();
  private boolean closed;

  private record SaveOps(Placeholder<TString> prefix, List<Placeholder<?>> inputs, Op save) {}

  private record RestoreOps(Placeholder<TString> prefix, Restore restore) {}

  TfBackend(Path root, int keep, String prefixName, boolean fsync) throws IOException {
    this.root = root;
    this.keep = keep;
    this.prefixName = prefixName;
    this.fsync = fsync;
    CheckpointDirs.open(root, keep);
  }

  @Override
  public String name() {
    return NAME;
  }

  private void ensureSession() {
    if (graph == null) {
      graph = new Graph();
      tf = Ops.create(graph);
      session = new Session(graph);
    }
  }

  @Override
  public synchronized CheckpointInfo save(long step, Map<String, String> metadata,
      List<TensorView> tensors) throws IOException {
    checkOpen();
    if (step < 0) {
      throw new IllegalArgumentException("step must be >= 0, got " + step);
    }
    FilesBackend.checkUniqueNames(tensors);
    ensureSession();
    SaveOps ops = saveOps(tensors);
    Path tmp = CheckpointDirs.newTemp(root, step);
    boolean done = false;
    List<Tensor> owned = new ArrayList<>();
    try {
      String prefix = tmp.resolve(prefixName).toString();
      try (TString p = TString.scalarOf(prefix)) {
        Session.Runner r = session.runner().feed(ops.prefix(), p);
        for (int i = 0; i < tensors.size(); i++) {
          TensorView v = tensors.get(i);
          Tensor t = v.tensor();
          if (t == null) {
            t = Tensor.of(v.dtype().tensorClass(), Shape.of(v.shape()));
            owned.add(t);
            if (v.byteSize() > 0) {
              NativeMemory.wrap(NativeMemory.address(t), v.byteSize()).put(v.data());
            }
          }
          r.feed(ops.inputs().get(i), t);
        }
        try (Result ignored = r.addTarget(ops.save()).run()) {
          // SaveV2 has no outputs
        } catch (TensorFlowException e) {
          throw new IOException("SaveV2 to " + prefix + " failed: " + e.getMessage(), e);
        }
      }
      List<Path> files = new ArrayList<>();
      try (DirectoryStream<Path> ds = Files.newDirectoryStream(tmp)) {
        ds.forEach(files::add);
      }
      if (fsync) {
        for (Path f : files) {
          CheckpointDirs.fsync(f);
        }
      }
      List<TensorSpec> specs = tensors.stream().map(TensorView::spec).toList();
      writeMeta(tmp.resolve(META), step, metadata, specs);
      Path dest = CheckpointDirs.commit(root, tmp, step);
      done = true;
      CheckpointDirs.prune(root, keep);
      writeState();
      return new CheckpointInfo(step, metadata, specs, dest.resolve(prefixName).toString());
    } finally {
      owned.forEach(Tensor::close);
      if (!done) {
        try {
          CheckpointDirs.deleteTree(tmp);
        } catch (IOException e) {
          LOG.warn("could not remove the incomplete checkpoint {}: {}", tmp, e.toString());
        }
      }
    }
  }

  private SaveOps saveOps(List<TensorView> tensors) {
    StringBuilder key = new StringBuilder();
    for (TensorView v : tensors) {
      key.append(v.name()).append('\u0000').append(v.dtype()).append(Arrays.toString(v.shape()))
          .append('\u0001');
    }
    return saves.computeIfAbsent(key.toString(), k -> {
      Ops s = tf.withSubScope("save" + saves.size());
      Placeholder<TString> prefix = s.withName("prefix").placeholder(TString.class,
          Placeholder.shape(Shape.scalar()));
      List<Placeholder<?>> inputs = new ArrayList<>();
      List<Operand<?>> operands = new ArrayList<>();
      String[] names = new String[tensors.size()];
      String[] slices = new String[tensors.size()];
      for (int i = 0; i < tensors.size(); i++) {
        TensorView v = tensors.get(i);
        Placeholder<? extends TType> ph = s.withName("t" + i).placeholder(v.dtype().tensorClass(),
            Placeholder.shape(Shape.of(v.shape())));
        inputs.add(ph);
        operands.add(ph);
        names[i] = v.name();
        slices[i] = "";
      }
      Op save = s.withName("save").train.save(prefix, s.constant(NdArrays.vectorOfObjects(names)), s.constant(NdArrays.vectorOfObjects(slices)),
          operands);
      return new SaveOps(prefix, inputs, save);
    });
  }

  private RestoreOps restoreOps(List<TensorView> targets) {
    StringBuilder key = new StringBuilder();
    for (TensorView v : targets) {
      key.append(v.name()).append('\u0000').append(v.dtype()).append('\u0001');
    }
    return restores.computeIfAbsent(key.toString(), k -> {
      Ops s = tf.withSubScope("restore" + restores.size());
      Placeholder<TString> prefix = s.withName("prefix").placeholder(TString.class,
          Placeholder.shape(Shape.scalar()));
      String[] names = new String[targets.size()];
      String[] slices = new String[targets.size()];
      List<Class<? extends TType>> types = new ArrayList<>();
      for (int i = 0; i < targets.size(); i++) {
        names[i] = targets.get(i).name();
        slices[i] = "";
        types.add(targets.get(i).dtype().tensorClass());
      }
      Restore r = s.withName("restore").train.restore(prefix, s.constant(NdArrays.vectorOfObjects(names)),
          s.constant(NdArrays.vectorOfObjects(slices)), types);
      return new RestoreOps(prefix, r);
    });
  }

  @Override
  public synchronized void load(CheckpointInfo checkpoint, List<TensorView> targets)
      throws IOException {
    checkOpen();
    String prefix = checkpoint.location();
    if (!Files.isRegularFile(Path.of(prefix + ".index"))) {
      throw new IOException("no TensorFlow checkpoint at prefix " + prefix + " (" + prefix
          + ".index is missing)");
    }
    for (TensorView t : targets) {
      checkpoint.tensor(t.name()).ifPresent(spec -> {
        if (!spec.sameLayout(t.spec())) {
          throw new IllegalArgumentException("tensor '" + t.name() + "' is " + spec.dtype()
              + Arrays.toString(spec.shape()) + " in checkpoint " + prefix + " but the target is "
              + t.dtype() + Arrays.toString(t.shape()));
        }
      });
    }
    if (targets.isEmpty()) {
      return;
    }
    ensureSession();
    RestoreOps ops = restoreOps(targets);
    Session.Runner r;
    try (TString p = TString.scalarOf(prefix)) {
      r = session.runner().feed(ops.prefix(), p);
      for (Operand<?> o : ops.restore().tensors()) {
        r.fetch(o);
      }
      try (Result res = r.run()) {
        for (int i = 0; i < targets.size(); i++) {
          TensorView t = targets.get(i);
          Tensor out = res.get(i);
          if (!Arrays.equals(out.shape().asArray(), t.shape())) {
            throw new IllegalArgumentException("tensor '" + t.name() + "' has shape "
                + Arrays.toString(out.shape().asArray()) + " in checkpoint " + prefix
                + " but the target has " + Arrays.toString(t.shape()));
          }
          if (t.byteSize() > 0) {
            ByteBuffer src = NativeMemory.wrap(NativeMemory.address(out), out.numBytes());
            t.data().put(src); // the one copy of a tf load
          }
        }
      } catch (TensorFlowException e) {
        String m = String.valueOf(e.getMessage());
        if (m.contains("Checksum") || m.contains("checksum") || m.contains("corrupt")
            || m.contains("truncated") || m.contains("DATA_LOSS")) {
          throw new CorruptCheckpointException("checkpoint " + prefix + " is corrupted: " + m);
        }
        throw new IOException("RestoreV2 from " + prefix + " failed: " + m, e);
      }
    }
  }

  @Override
  public List<CheckpointInfo> list() throws IOException {
    List<CheckpointInfo> out = new ArrayList<>();
    for (Path dir : CheckpointDirs.complete(root)) {
      try {
        out.add(readMeta(dir));
      } catch (IOException | RuntimeException e) {
        if (Files.exists(dir)) {
          LOG.warn("skipping checkpoint {}: {}", dir, e.getMessage());
        }
      }
    }
    // checkpoints TensorFlow itself wrote into the root: <prefix>.index, step from "-<digits>"
    if (Files.isDirectory(root)) {
      try (DirectoryStream<Path> ds = Files.newDirectoryStream(root, "*.index")) {
        for (Path idx : ds) {
          String f = idx.getFileName().toString();
          String prefixName = f.substring(0, f.length() - ".index".length());
          Matcher m = STEP_SUFFIX.matcher(prefixName);
          long step = m.matches() ? Long.parseLong(m.group(1)) : 0;
          out.add(new CheckpointInfo(step, Map.of("source", "tensorflow"), List.of(),
              root.resolve(prefixName).toString()));
        }
      }
    }
    out.sort(Comparator.comparingLong(CheckpointInfo::step)
        .thenComparing(CheckpointInfo::location));
    return out;
  }

  private void writeMeta(Path file, long step, Map<String, String> metadata,
      List<TensorSpec> specs) throws IOException {
    ObjectNode root = JSON.createObjectNode();
    root.put("format", FORMAT).put("step", step).put("prefix", prefixName);
    ObjectNode md = root.putObject("metadata");
    new TreeMap<>(metadata).forEach(md::put);
    ArrayNode arr = root.putArray("tensors");
    for (TensorSpec s : specs) {
      ObjectNode t = arr.addObject();
      t.put("name", s.name()).put("dtype", s.dtype().manifestName()).put("bytes", s.byteSize());
      ArrayNode shape = t.putArray("shape");
      for (long d : s.shape()) {
        shape.add(d);
      }
    }
    Files.write(file, JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(root));
    if (fsync) {
      CheckpointDirs.fsync(file);
    }
  }

  private static CheckpointInfo readMeta(Path dir) throws IOException {
    JsonNode root = JSON.readTree(Files.readAllBytes(dir.resolve(META)));
    if (!FORMAT.equals(root.path("format").asText())) {
      throw new IOException(META + " has format '" + root.path("format").asText() + "'");
    }
    Map<String, String> md = new LinkedHashMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = root.path("metadata").fields(); it.hasNext();) {
      Map.Entry<String, JsonNode> e = it.next();
      md.put(e.getKey(), e.getValue().asText());
    }
    List<TensorSpec> specs = new ArrayList<>();
    for (JsonNode t : root.path("tensors")) {
      long[] shape = new long[t.path("shape").size()];
      for (int i = 0; i < shape.length; i++) {
        shape[i] = t.path("shape").get(i).asLong();
      }
      specs.add(new TensorSpec(t.path("name").asText(), DType.fromName(t.path("dtype").asText()),
          shape, t.path("bytes").asLong()));
    }
    return new CheckpointInfo(root.path("step").asLong(), md, specs,
        dir.resolve(root.path("prefix").asText("model")).toString());
  }

  /** TensorFlow's {@code checkpoint} state file, so {@code tf.train.latest_checkpoint} works. */
  private void writeState() throws IOException {
    List<Path> dirs = CheckpointDirs.complete(root);
    if (dirs.isEmpty()) {
      return;
    }
    StringBuilder sb = new StringBuilder();
    sb.append("model_checkpoint_path: \"").append(dirs.get(dirs.size() - 1).getFileName())
        .append('/').append(prefixName).append("\"\n");
    for (Path d : dirs) {
      sb.append("all_model_checkpoint_paths: \"").append(d.getFileName()).append('/')
          .append(prefixName).append("\"\n");
    }
    Path tmp = root.resolve(".tmp-" + STATE);
    Files.write(tmp, sb.toString().getBytes(StandardCharsets.UTF_8));
    if (fsync) {
      CheckpointDirs.fsync(tmp);
    }
    Files.move(tmp, root.resolve(STATE), StandardCopyOption.ATOMIC_MOVE,
        StandardCopyOption.REPLACE_EXISTING);
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("the tf backend on " + root + " is closed");
    }
  }

  @Override
  public synchronized void close() {
    if (!closed) {
      closed = true;
      if (session != null) {
        session.close();
        graph.close();
      }
    }
  }

  @Override
  public String toString() {
    return "tf(" + root + ", keep=" + keep + ")";
  }
}
