package org.tensorflow;

import static org.tensorflow.internal.c_api.global.tensorflow.TF_DeleteSessionOptions;
import static org.tensorflow.internal.c_api.global.tensorflow.TF_NewSession;
import static org.tensorflow.internal.c_api.global.tensorflow.TF_NewSessionOptions;
import static org.tensorflow.internal.c_api.global.tensorflow.TF_SetConfig;
import static org.tensorflow.internal.c_api.global.tensorflow.TF_SetTarget;

import java.util.Objects;
import org.bytedeco.javacpp.BytePointer;
import org.tensorflow.internal.c_api.TF_Session;
import org.tensorflow.internal.c_api.TF_SessionOptions;
import org.tensorflow.internal.c_api.TF_Status;
import org.tensorflow.proto.ConfigProto;

/**
 * Sessions on a TensorFlow server target ({@code grpc://host:port}), which TF Java 1.1.0 has no
 * public constructor for: every public {@link Session} constructor passes no target to the C API.
 * This class builds the {@code TF_SessionOptions} itself ({@code TF_SetTarget},
 * {@code TF_SetConfig}), creates the native session and wraps it with {@link Session}'s
 * package-private {@code (Graph, TF_Session)} constructor; that is why it lives in package
 * {@code org.tensorflow}. It works on the class path only: on the module path the package
 * belongs to TensorFlow's module and a split package is refused, which {@link #open} reports as
 * an {@link IllegalStateException} naming the cause.
 *
 * <pre>{@code
 * try (Session s = TargetSessions.open(graph, "grpc://127.0.0.1:2222", config)) { ... }
 * }</pre>
 */
public final class TargetSessions {
  private TargetSessions() {}

  /**
   * Opens a session on {@code target} for {@code graph}; the caller must close it (it holds a
   * native session and a reference to the graph).
   *
   * @param graph  the graph
   * @param target a TensorFlow target such as {@code grpc://127.0.0.1:2222}
   * @param config the session config
   * @return the session
   * @throws IllegalStateException when this class is not in TensorFlow's own package at run time
   *                               (module path) or the session cannot be created
   */
  public static Session open(Graph graph, String target, ConfigProto config) {
    Objects.requireNonNull(graph, "graph");
    Objects.requireNonNull(target, "target");
    Objects.requireNonNull(config, "config");
    if (TargetSessions.class.getModule() != Session.class.getModule()) {
      throw new IllegalStateException("org.tensorflow.TargetSessions must be loaded from the "
          + "class path with TensorFlow (it uses Session's package-private constructor); on the "
          + "module path run lms4j's distributed training from the class path");
    }
    TF_SessionOptions opts = TF_NewSessionOptions();
    try (Graph.Reference ref = graph.ref(); TF_Status status = TF_Status.newStatus()) {
      TF_SetTarget(opts, target);
      byte[] bytes = config.toByteArray();
      try (BytePointer p = new BytePointer(bytes)) {
        TF_SetConfig(opts, p, bytes.length, status);
        status.throwExceptionIfNotOK();
      }
      TF_Session handle = TF_NewSession(ref.nativeHandle(), opts, status);
      status.throwExceptionIfNotOK();
      return new Session(graph, handle);
    } finally {
      TF_DeleteSessionOptions(opts);
    }
  }
}
