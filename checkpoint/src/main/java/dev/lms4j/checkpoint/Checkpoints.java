package dev.lms4j.checkpoint;

import dev.lms4j.tf.SlotOffload;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.GraphOperation;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.proto.DataType;

/**
 * Saves a session's variables through a {@link CheckpointBackend} and restores them.
 *
 * <p><b>Save</b> fetches every variable in one {@code Session.run} and hands the backend
 * zero-copy {@link TensorView}s over the fetched tensors (which, for {@code VariableV2}, alias the
 * variables' own memory: no step may run until {@code save} returns).
 *
 * <p><b>Load</b> allocates one tensor per variable, lets the backend fill its memory directly,
 * then assigns all of them in one {@code Session.run} through {@code Placeholder} + {@code Assign}
 * ops ({@code AssignVariableOp} for resource variables) added to the session's graph under
 * {@code lms4j_restore/<variable>/}. A session extends itself when its graph grows, so this works
 * after the session was created; the ops are created once and found again by name on later loads
 * (the graph is their cache). Variables are only assigned once every tensor was read and
 * verified, so a refused checkpoint leaves them untouched.
 *
 * <p>Optimizer state (momentum, Adam's slots, a global step) is saved by naming those variables
 * too; {@link #variables(Graph)} lists every variable of a graph. A slot LMS keeps on the host
 * between its updates ({@link SlotOffload}) is saved from its host copy and restored into it,
 * under the slot's own name: a checkpoint moves between a rewritten graph and the original.
 *
 * <pre>{@code
 * List<String> vars = Checkpoints.variables(graph);           // weights + optimizer slots
 * try (CheckpointBackend b = CheckpointBackends.open("files", "dir=/tmp/ckpt,keep=3")) {
 *   Checkpoints.save(session, vars, step, Map.of("loss", "0.31"), b);
 *   ...
 *   CheckpointInfo restored = Checkpoints.load(session, vars, b);   // the latest
 * }
 * }</pre>
 */
public final class Checkpoints {
  private static final Logger LOG = LoggerFactory.getLogger(Checkpoints.class);
  private static final Set<String> REF_VARIABLES = Set.of("VariableV2", "Variable");
  private static final String RESOURCE_VARIABLE = "VarHandleOp";
  /** The name scope of the ops lms4j adds to a graph for saving and restoring. */
  public static final String SCOPE = "lms4j_restore";

  private Checkpoints() {}

  /**
   * The names of all variables of {@code graph} ({@code VariableV2}, {@code Variable},
   * {@code VarHandleOp}), optimizer state included, sorted by name.
   */
  public static List<String> variables(Graph graph) {
    TreeSet<String> names = new TreeSet<>();
    for (Iterator<GraphOperation> it = graph.operations(); it.hasNext(); ) {
      GraphOperation op = it.next();
      if ((REF_VARIABLES.contains(op.type()) || RESOURCE_VARIABLE.equals(op.type()))
          && !op.name().startsWith(SlotOffload.SCOPE)) {
        names.add(op.name());
      }
    }
    return List.copyOf(names);
  }

  /**
   * Saves {@code variables} as the checkpoint of the step after the backend's latest (0 when it
   * has none), without metadata.
   *
   * @see #save(Session, List, long, Map, CheckpointBackend)
   */
  public static CheckpointInfo save(Session session, List<String> variables,
      CheckpointBackend backend) throws IOException {
    long step = backend.latest().map(c -> c.step() + 1).orElse(0L);
    return save(session, variables, step, Map.of(), backend);
  }

  /**
   * Saves {@code variables} (op names, {@code ":0"} allowed) as the checkpoint of {@code step},
   * in the given order, with {@code metadata}. No tensor byte is copied on the Java side.
   *
   * @throws IllegalArgumentException when a name is not a variable of the session's graph, or
   *     appears twice
   * @throws IOException when the backend fails
   */
  public static CheckpointInfo save(Session session, List<String> variables, long step,
      Map<String, String> metadata, CheckpointBackend backend) throws IOException {
    try (Fetched f = fetch(session, variables)) {
      return backend.save(step, metadata, f.views());
    }
  }

  /**
   * Restores {@code variables} from the backend's latest checkpoint.
   *
   * @return the checkpoint restored
   * @throws IOException when the backend has no checkpoint, or loading fails
   */
  public static CheckpointInfo load(Session session, List<String> variables,
      CheckpointBackend backend) throws IOException {
    CheckpointInfo latest = backend.latest().orElseThrow(() -> new IOException(
        "no complete checkpoint to load from " + backend));
    load(session, variables, latest, backend);
    return latest;
  }

  /**
   * Restores {@code variables} from {@code checkpoint}: the backend fills freshly allocated
   * tensors, which are then assigned to the variables in one run.
   *
   * @throws IllegalArgumentException when a name is not a variable, or its dtype/shape differs
   *     from the checkpoint's
   * @throws IOException when the backend fails (the variables are unchanged then)
   */
  public static void load(Session session, List<String> variables, CheckpointInfo checkpoint,
      CheckpointBackend backend) throws IOException {
    Graph g = session.graph();
    List<Var> vars = resolve(g, variables);
    List<Tensor> tensors = new ArrayList<>();
    try {
      List<TensorView> views = new ArrayList<>();
      for (Var v : vars) {
        long[] shape = v.shape;
        if (shape == null) {
          shape = checkpoint.tensor(v.name).map(TensorSpec::shape).orElseThrow(() ->
              new IllegalArgumentException("variable '" + v.name + "' has no static shape and "
                  + "checkpoint " + checkpoint.location() + " does not list it"));
        }
        Tensor t = Tensor.of(v.dtype.tensorClass(), Shape.of(shape));
        tensors.add(t);
        TensorView view = TensorView.of(v.name, t);
        checkpoint.tensor(v.name).ifPresent(spec -> {
          if (!spec.sameLayout(view.spec())) {
            throw new IllegalArgumentException("variable '" + v.name + "' is " + view.dtype()
                + Arrays.toString(view.shape()) + " but checkpoint " + checkpoint.location()
                + " holds " + spec.dtype() + Arrays.toString(spec.shape()));
          }
        });
        views.add(view);
      }
      long t0 = System.nanoTime();
      backend.load(checkpoint, views);
      long t1 = System.nanoTime();
      Session.Runner r = session.runner();
      synchronized (g) {
        for (int i = 0; i < vars.size(); i++) {
          RestoreOp op = restoreOp(g, vars.get(i), tensors.get(i).shape());
          r.feed(op.value.output(0), tensors.get(i)).addTarget(op.assign);
        }
      }
      try (Result ignored = r.run()) {
        // targets only
      }
      LOG.debug("restored {} variables from step {} ({}): read {} ms, assign {} ms", vars.size(),
          checkpoint.step(), checkpoint.location(), (t1 - t0) / 1_000_000,
          (System.nanoTime() - t1) / 1_000_000);
    } finally {
      tensors.forEach(Tensor::close);
    }
  }

  /** The fetched values of some variables and views over them; closing frees the tensors. */
  static final class Fetched implements AutoCloseable {
    private final Result result;
    private final List<TensorView> views;

    private Fetched(Result result, List<TensorView> views) {
      this.result = result;
      this.views = views;
    }

    List<TensorView> views() {
      return views;
    }

    long byteSize() {
      return views.stream().mapToLong(TensorView::byteSize).sum();
    }

    @Override
    public void close() {
      result.close();
    }
  }

  /** Fetches the variables' values in one run (no copy: the views alias the variables). */
  static Fetched fetch(Session session, List<String> variables) {
    Graph g = session.graph();
    List<Var> vars = resolve(g, variables);
    Session.Runner r = session.runner();
    synchronized (g) {
      for (Var v : vars) {
        if (v.resource) {
          r.fetch(readOp(g, v).output(0));
        } else if (v.offloaded) {
          // a copy parsed from the host (the slot itself holds nothing between steps)
          r.fetch(SlotOffload.valueOf(v.name), 0);
        } else {
          r.fetch(v.name, 0);
        }
      }
    }
    Result res = r.run();
    try {
      List<TensorView> views = new ArrayList<>();
      for (int i = 0; i < vars.size(); i++) {
        views.add(TensorView.of(vars.get(i).name, res.get(i)));
      }
      return new Fetched(res, views);
    } catch (RuntimeException e) {
      res.close();
      throw e;
    }
  }

  /**
   * A variable of the graph: name, dtype, static shape (null when not fully known), and whether
   * it is a resource variable or a slot LMS keeps on the host between its updates
   * ({@link SlotOffload}).
   */
  private record Var(String name, DType dtype, long[] shape, boolean resource,
      boolean offloaded) {}

  private static List<Var> resolve(Graph g, List<String> names) {
    List<Var> out = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    for (String raw : names) {
      String name = raw.endsWith(":0") ? raw.substring(0, raw.length() - 2) : raw;
      if (!seen.add(name)) {
        throw new IllegalArgumentException("variable '" + name + "' is listed twice");
      }
      GraphOperation op = g.operation(name);
      if (op == null) {
        throw new IllegalArgumentException("no operation named '" + name + "' in the graph");
      }
      boolean resource = RESOURCE_VARIABLE.equals(op.type());
      if (!resource && !REF_VARIABLES.contains(op.type())) {
        throw new IllegalArgumentException("'" + name + "' is not a variable (its op type is "
            + op.type() + "; expected VariableV2, Variable or VarHandleOp)");
      }
      DataType dt = op.attributes().getAttrType("dtype");
      GraphOperation offload = resource ? null : g.operation(SlotOffload.valueOf(name));
      Shape shape = offload != null ? offload.attributes().getAttrShape(SlotOffload.SHAPE_ATTR)
          : op.attributes().getAttrShape("shape");
      long[] s = shape.isUnknown() || shape.hasUnknownDimension() ? null : shape.asArray();
      out.add(new Var(name, DType.of(dt), s, resource, offload != null));
    }
    return out;
  }

  private record RestoreOp(GraphOperation value, GraphOperation assign) {}

  /** The placeholder + assign of a variable, created on first use (caller holds the graph). */
  private static RestoreOp restoreOp(Graph g, Var v, Shape shape) {
    String base = SCOPE + "/" + v.name + "/";
    GraphOperation value = g.operation(base + "value");
    GraphOperation assign = g.operation(base + "assign");
    if (value == null || assign == null) {
      Ops tf = Ops.create(g);
      value = (GraphOperation) g.opBuilder("Placeholder", base + "value", tf.scope())
          .setAttr("dtype", v.dtype.tfType()).setAttr("shape", shape).build();
      GraphOperation var = g.operationOrThrow(v.name);
      if (v.offloaded) {
        // the slot's host copy takes it, serialized, as the step's swap-out writes it
        GraphOperation ser = (GraphOperation) g.opBuilder("SerializeTensor", base + "serialize",
            tf.scope()).addInput(value.output(0)).setAttr("T", v.dtype.tfType()).build();
        assign = (GraphOperation) g.opBuilder("Assign", base + "assign", tf.scope())
            .addInput(g.operationOrThrow(SlotOffload.hostOf(v.name)).output(0))
            .addInput(ser.output(0)).setAttr("validate_shape", true).build();
      } else if (v.resource) {
        assign = (GraphOperation) g.opBuilder("AssignVariableOp", base + "assign", tf.scope())
            .addInput(var.output(0)).addInput(value.output(0))
            .setAttr("dtype", v.dtype.tfType()).build();
      } else {
        assign = (GraphOperation) g.opBuilder("Assign", base + "assign", tf.scope())
            .addInput(var.output(0)).addInput(value.output(0))
            .setAttr("validate_shape", true).build();
      }
    }
    return new RestoreOp(value, assign);
  }

  /** The {@code ReadVariableOp} of a resource variable, created on first use. */
  private static GraphOperation readOp(Graph g, Var v) {
    String name = SCOPE + "/" + v.name + "/read";
    GraphOperation read = g.operation(name);
    if (read == null) {
      Ops tf = Ops.create(g);
      read = (GraphOperation) g.opBuilder("ReadVariableOp", name, tf.scope())
          .addInput(g.operationOrThrow(v.name).output(0)).setAttr("dtype", v.dtype.tfType())
          .build();
    }
    return read;
  }
}
