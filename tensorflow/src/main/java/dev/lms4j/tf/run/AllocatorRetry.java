package dev.lms4j.tf.run;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * lms4j's allocator retry ({@code liblms4jalloc.so}, built from {@code src/main/native/
 * lms4j_alloc.cc} with the machine's g++ and carried in the jar), which budgeted workers whose
 * ops run one at a time preload ({@link WorkerProcess#run(String, java.util.List, long,
 * java.time.Duration, java.util.function.Consumer, java.util.function.Consumer, boolean)}).
 *
 * <p>When an allocation fails, TensorFlow's BFC allocator waits up to 10 s for another thread to
 * free memory before it fails the op. With ops run one at a time in the caller's thread only
 * lms4j's asynchronous swap-outs can free memory in that wait; the preloaded library waits
 * while such a copy is in flight and otherwise fails the allocation at once, with TensorFlow's
 * own out-of-memory line and dump. Every run that runs out of memory (a probe's failed try, a
 * bisection's step) thus ends about 10 s sooner; what fits and what does not is unchanged.
 *
 * <p>{@link #library()} extracts the library once into the temporary directory, under a name
 * that carries its content's hash (so runs share one file and a killed JVM leaves nothing new
 * behind), or returns null where it cannot: another system, a build without the native
 * libraries, or {@code LMS4J_ALLOC_RETRY=tf} in the environment (TensorFlow's own wait).
 */
public final class AllocatorRetry {
  private static final Logger LOG = LoggerFactory.getLogger(AllocatorRetry.class);
  /** Where the library sits in the jar. */
  public static final String RESOURCE = "/dev/lms4j/tf/native/linux-x86_64/liblms4jalloc.so";
  /** Environment variable that, set to {@code tf}, keeps TensorFlow's own 10 s wait. */
  public static final String ENV = "LMS4J_ALLOC_RETRY";

  private static boolean attempted;
  private static Path library;

  private AllocatorRetry() {}

  /** The extracted library's path, or null (the reason is logged once at debug level). */
  public static synchronized Path library() {
    if (attempted) {
      return library;
    }
    attempted = true;
    try {
      String mode = System.getenv(ENV);
      if (mode != null && mode.equalsIgnoreCase("tf")) {
        throw new UnsupportedOperationException(ENV + "=tf");
      }
      if (!dev.lms4j.tf.NativeSwap.linuxX86()) {
        throw new UnsupportedOperationException("built for linux-x86_64 only");
      }
      byte[] bytes;
      try (InputStream in = AllocatorRetry.class.getResourceAsStream(RESOURCE)) {
        if (in == null) {
          throw new UnsupportedOperationException("the jar holds no " + RESOURCE);
        }
        bytes = in.readAllBytes();
      }
      String hash = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes))
          .substring(0, 16);
      Path dir = Path.of(System.getProperty("java.io.tmpdir"));
      Path lib = dir.resolve("liblms4jalloc-" + hash + ".so");
      if (!Files.isRegularFile(lib) || Files.size(lib) != bytes.length) {
        Path tmp = Files.createTempFile(dir, "liblms4jalloc", ".tmp");
        try {
          Files.write(tmp, bytes);
          try {
            Files.move(tmp, lib, StandardCopyOption.REPLACE_EXISTING,
                StandardCopyOption.ATOMIC_MOVE);
          } catch (AtomicMoveNotSupportedException e) {
            Files.move(tmp, lib, StandardCopyOption.REPLACE_EXISTING);
          }
        } finally {
          Files.deleteIfExists(tmp);
        }
      }
      library = lib;
      LOG.debug("allocator retry library at {}", lib);
    } catch (IOException | RuntimeException | NoSuchAlgorithmException e) {
      LOG.debug("allocator retry library not used ({}): failed allocations wait TensorFlow's "
          + "10 s", e.getMessage());
    }
    return library;
  }
}
