package dev.lms4j.tf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.tensorflow.Graph;
import org.tensorflow.SavedModelBundle;
import org.tensorflow.Session;
import org.tensorflow.Signature;
import org.tensorflow.proto.MetaGraphDef;
import org.tensorflow.proto.SavedModel;
import org.tensorflow.proto.SaverDef;
import org.tensorflow.types.TString;

/**
 * Saving a training graph as a SavedModel and loading one back, optionally applying LMS on load.
 *
 * <pre>{@code
 * SavedModels.save(session, graph, manifest, dir);           // keeps any lms4j swap nodes
 * try (SavedModels.Loaded m = SavedModels.load(dir, lms)) {   // lms may be null
 *   m.session().runner()...
 * }
 * }</pre>
 *
 * The manifest travels with the model as {@code assets.extra/lms4j-manifest.json}; the variables
 * are TensorFlow's own checkpoint under {@code variables/}, so TensorFlow tools read the model.
 */
public final class SavedModels {
  /** The tag lms4j saves under (TensorFlow's default serving tag). */
  public static final String TAG = SavedModelBundle.DEFAULT_TAG;
  private static final String MANIFEST = "assets.extra/lms4j-manifest.json";

  private SavedModels() {}

  /**
   * Exports the graph and the session's variables to {@code dir} (which must not exist), with a
   * {@code train} signature (feeds in, loss out) and the manifest.
   */
  public static void save(Session session, Graph graph, Manifest manifest, Path dir)
      throws IOException {
    if (Files.exists(dir)) {
      throw new IllegalArgumentException(dir + " already exists; a SavedModel needs a new "
          + "directory");
    }
    Signature.Builder sig = Signature.builder().key("train");
    for (Manifest.Feed f : manifest.feeds()) {
      sig.input(f.name(), graph.outputOrThrow(f.name()));
    }
    sig.output("loss", graph.outputOrThrow(manifest.loss()));
    SavedModelBundle.exporter(dir.toString()).withSession(session).withSignature(sig.build())
        .withTags(TAG).export();
    Path mf = dir.resolve(MANIFEST);
    Files.createDirectories(mf.getParent());
    manifest.write(mf);
  }

  /** The manifest saved with a model. */
  public static Manifest manifest(Path dir) throws IOException {
    Path mf = dir.resolve(MANIFEST);
    if (!Files.isRegularFile(mf)) {
      throw new IllegalArgumentException(dir + " has no " + MANIFEST + " (not saved by lms4j; "
          + "give a manifest)");
    }
    return Manifest.read(mf);
  }

  /**
   * Loads a SavedModel saved by {@link #save}: imports its graph (rewritten by {@code lms} first
   * when not null), starts a session and restores the variables. The result must be closed.
   */
  public static Loaded load(Path dir, Lms lms) throws IOException {
    SavedModel sm = SavedModel.parseFrom(Files.readAllBytes(dir.resolve("saved_model.pb")));
    MetaGraphDef mg = sm.getMetaGraphsList().stream()
        .filter(m -> m.getMetaInfoDef().getTagsList().contains(TAG)).findFirst()
        .orElseThrow(() -> new IllegalArgumentException(dir + " has no meta graph tagged "
            + TAG));
    Manifest manifest = manifest(dir);
    TrainingGraph tg = new TrainingGraph(mg.getGraphDef(), manifest);
    LmsResult lr = lms == null ? null : lms.rewrite(tg);
    Graph g = new Graph();
    Session s = null;
    try {
      NativeSwap.ensureLoadedFor(lr == null ? tg.graphDef() : lr.graphDef());
      g.importGraphDef(lr == null ? tg.graphDef() : lr.graphDef());
      s = new Session(g, SessionConfigs.lms());
      SaverDef saver = mg.getSaverDef();
      String prefix = dir.resolve("variables").resolve("variables").toString();
      try (TString p = TString.scalarOf(prefix)) {
        s.runner().feed(saver.getFilenameTensorName(), p).addTarget(saver.getRestoreOpName())
            .run();
      }
      return new Loaded(g, s, manifest, lr);
    } catch (RuntimeException e) {
      if (s != null) {
        s.close();
      }
      g.close();
      throw e;
    }
  }

  /**
   * A loaded model: its graph, a session with the variables restored, its manifest, and the LMS
   * result when LMS was applied on load. Closing closes the session and the graph.
   */
  public static final class Loaded implements AutoCloseable {
    private final Graph graph;
    private final Session session;
    private final Manifest manifest;
    private final LmsResult lms;
    private boolean closed;

    private Loaded(Graph graph, Session session, Manifest manifest, LmsResult lms) {
      this.graph = graph;
      this.session = session;
      this.manifest = manifest;
      this.lms = lms;
    }

    /** The graph (rewritten when LMS was applied). */
    public Graph graph() {
      return graph;
    }

    /** The session, variables restored. */
    public Session session() {
      return session;
    }

    /** The manifest saved with the model. */
    public Manifest manifest() {
      return manifest;
    }

    /** The LMS result when LMS was applied on load, else null. */
    public LmsResult lms() {
      return lms;
    }

    @Override
    public void close() {
      if (!closed) {
        closed = true;
        session.close();
        graph.close();
      }
    }
  }
}
