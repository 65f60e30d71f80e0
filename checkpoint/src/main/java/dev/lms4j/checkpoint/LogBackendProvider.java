package dev.lms4j.checkpoint;

import java.util.Locale;
import java.util.Set;

/**
 * Provides the {@code log} backend, which writes nothing: it logs each tensor's name, dtype,
 * shape, size and native address through SLF4J (logger {@code dev.lms4j.checkpoint.LogBackend}),
 * like TMCI's dummy plugin. It lists no checkpoint and cannot load
 * ({@link UnsupportedOperationException}).
 *
 * <p>Parameters: {@code level} = {@code info} (default) or {@code debug}.
 *
 * <pre>{@code
 * CheckpointBackend b = CheckpointBackends.open("log", "level=info");
 * }</pre>
 */
public final class LogBackendProvider implements CheckpointBackendProvider {

  /** The provider (for {@link java.util.ServiceLoader}). */
  public LogBackendProvider() {}

  /** {@code log}. */
  @Override
  public String name() {
    return LogBackend.NAME;
  }

  /**
   * A {@code log} backend.
   *
   * @throws IllegalArgumentException for an unknown key or level
   */
  @Override
  public CheckpointBackend create(String params) {
    BackendParams p = BackendParams.parse(name(), params, Set.of("level"));
    String level = p.string("level", "info").toLowerCase(Locale.ROOT);
    if (!level.equals("info") && !level.equals("debug")) {
      throw new IllegalArgumentException("backend 'log': parameter 'level' must be info or debug,"
          + " got '" + p.get("level") + "'");
    }
    return new LogBackend(level.equals("debug"));
  }
}
