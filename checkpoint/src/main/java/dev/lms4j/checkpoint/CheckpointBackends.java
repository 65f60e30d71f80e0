package dev.lms4j.checkpoint;

import java.io.IOException;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The registry of checkpoint backends by name: the built-in ones ({@code files}, {@code tf},
 * {@code log}), any {@link CheckpointBackendProvider} on the class path (found by
 * {@link ServiceLoader}), and those of plugin jars loaded at run time with
 * {@link #loadPlugin(Path)} (TMCI's {@code plugins.load} of a shared library, in Java).
 *
 * <pre>{@code
 * CheckpointBackends.loadPlugin(Path.of("my-backend.jar"));     // optional
 * try (CheckpointBackend b = CheckpointBackends.open("files", "dir=/tmp/ckpt,keep=3")) {
 *   Checkpoints.save(session, List.of("w0", "b0"), 100, Map.of(), b);
 * }
 * }</pre>
 */
public final class CheckpointBackends {
  private static final Logger LOG = LoggerFactory.getLogger(CheckpointBackends.class);
  private static final Object LOCK = new Object();
  /** Guarded by LOCK; null until first use. */
  private static Map<String, CheckpointBackendProvider> providers;

  private CheckpointBackends() {}

  private static Map<String, CheckpointBackendProvider> providers() {
    synchronized (LOCK) {
      if (providers == null) {
        Map<String, CheckpointBackendProvider> found = new TreeMap<>();
        for (CheckpointBackendProvider p : ServiceLoader.load(CheckpointBackendProvider.class,
            CheckpointBackends.class.getClassLoader())) {
          CheckpointBackendProvider old = found.putIfAbsent(p.name(), p);
          if (old != null) {
            LOG.warn("two checkpoint backends are named '{}': keeping {}, ignoring {}", p.name(),
                old.getClass().getName(), p.getClass().getName());
          }
        }
        providers = found;
      }
      return providers;
    }
  }

  /** The provider of the backend named {@code name}, if one is known. */
  public static Optional<CheckpointBackendProvider> find(String name) {
    synchronized (LOCK) {
      return Optional.ofNullable(providers().get(name));
    }
  }

  /**
   * The provider of the backend named {@code name}.
   *
   * @throws IllegalArgumentException when none is known; the message lists the known names
   */
  public static CheckpointBackendProvider findOrThrow(String name) {
    return find(name).orElseThrow(() -> new IllegalArgumentException("unknown checkpoint backend '"
        + name + "' (known: " + String.join(", ", names()) + "; a plugin jar must be loaded with "
        + "CheckpointBackends.loadPlugin first)"));
  }

  /**
   * A new backend: {@code findOrThrow(name).create(params)}.
   *
   * @throws IllegalArgumentException for an unknown name or invalid parameters
   */
  public static CheckpointBackend open(String name, String params) {
    return findOrThrow(name).create(params);
  }

  /** The names of all known backends, sorted. */
  public static SortedSet<String> names() {
    synchronized (LOCK) {
      return Collections.unmodifiableSortedSet(new TreeSet<>(providers().keySet()));
    }
  }

  /**
   * Loads the backends of a plugin jar: a class loader over the jar (child of this module's) and
   * {@link ServiceLoader} over its
   * {@code META-INF/services/dev.lms4j.checkpoint.CheckpointBackendProvider}. The class loader
   * stays open for the life of the process, since the backends' classes live in it.
   *
   * @return the names of the backends the jar provides, sorted
   * @throws IOException when the jar cannot be read
   * @throws IllegalArgumentException when the jar provides no backend, or one whose name is
   *     already taken (nothing of the jar is registered then)
   */
  public static List<String> loadPlugin(Path jar) throws IOException {
    if (!Files.isRegularFile(jar)) {
      throw new IOException("plugin jar " + jar + " does not exist or is not a file");
    }
    URL url;
    try {
      url = jar.toUri().toURL();
    } catch (MalformedURLException e) {
      throw new IOException("bad plugin path " + jar, e);
    }
    URLClassLoader loader = new URLClassLoader("lms4j-plugin:" + jar.getFileName(),
        new URL[] {url}, CheckpointBackends.class.getClassLoader());
    Map<String, CheckpointBackendProvider> found = new TreeMap<>();
    try {
      for (CheckpointBackendProvider p : ServiceLoader.load(CheckpointBackendProvider.class,
          loader)) {
        if (p.getClass().getClassLoader() != loader) {
          continue; // a provider of the parent (built-in or class path), already registered
        }
        if (found.put(p.name(), p) != null) {
          throw new IllegalArgumentException("plugin " + jar + " provides two backends named '"
              + p.name() + "'");
        }
      }
    } catch (ServiceConfigurationError e) {
      closeQuietly(loader);
      throw new IOException("plugin " + jar + ": cannot instantiate a provider: "
          + e.getMessage(), e);
    } catch (RuntimeException e) {
      closeQuietly(loader);
      throw e;
    }
    if (found.isEmpty()) {
      closeQuietly(loader);
      throw new IllegalArgumentException("plugin " + jar + " provides no checkpoint backend (it "
          + "needs META-INF/services/" + CheckpointBackendProvider.class.getName() + ")");
    }
    synchronized (LOCK) {
      Map<String, CheckpointBackendProvider> all = providers();
      for (String name : found.keySet()) {
        if (all.containsKey(name)) {
          closeQuietly(loader);
          throw new IllegalArgumentException("plugin " + jar + ": a checkpoint backend named '"
              + name + "' is already registered (" + all.get(name).getClass().getName() + ")");
        }
      }
      all.putAll(found);
    }
    LOG.info("loaded checkpoint backend plugin {}: {}", jar, found.keySet());
    return new ArrayList<>(found.keySet());
  }

  private static void closeQuietly(URLClassLoader loader) {
    try {
      loader.close();
    } catch (IOException e) {
      LOG.debug("closing a plugin class loader failed", e);
    }
  }
}
