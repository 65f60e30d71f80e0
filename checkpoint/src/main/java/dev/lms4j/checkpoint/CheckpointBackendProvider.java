package dev.lms4j.checkpoint;

/**
 * The service interface of a checkpoint backend (TMCI's plugin entry point). Implementations
 * are listed in {@code META-INF/services/dev.lms4j.checkpoint.CheckpointBackendProvider} and found
 * by {@link java.util.ServiceLoader}, either on the class path or in a plugin jar loaded with
 * {@link CheckpointBackends#loadPlugin(java.nio.file.Path)}. A provider needs a public no-argument
 * constructor.
 *
 * <pre>{@code
 * public final class MyProvider implements CheckpointBackendProvider {
 *   public String name() { return "mine"; }
 *   public CheckpointBackend create(String params) { return new MyBackend(BackendParams.parse(
 *       name(), params, Set.of("dir"))); }
 * }
 * }</pre>
 */
public interface CheckpointBackendProvider {

  /** The unique name of the backend, e.g. {@code files} (lower case, no spaces). */
  String name();

  /**
   * A new backend configured by {@code params}, whose format the backend decides (the built-in
   * ones take {@code key=value,key=value} or a JSON object, see {@link BackendParams}).
   *
   * @throws IllegalArgumentException when {@code params} are invalid, with a message saying why
   */
  CheckpointBackend create(String params);
}
