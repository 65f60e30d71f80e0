package dev.lms4j.tf;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.Session;
import org.tensorflow.TensorFlow;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.types.TInt64;

/**
 * The native swap op library ({@code liblms4jswap.so}, built from {@code src/main/native} with
 * the machine's gcc against TensorFlow's C kernel API and carried in the jar). It registers:
 *
 * <ul>
 *   <li>{@code Lms4jSwapOut(x: T) -> y: T}: one copy of {@code x} into host memory outside
 *       TensorFlow's allocator (so outside the BFC budget); TensorFlow's reference counting frees
 *       it after the last swap-in that reads it, also when a step fails.</li>
 *   <li>{@code Lms4jSwapIn(x: T) -> y: T}: one copy back into a tensor from the device
 *       allocator (counted in the budget).</li>
 *   <li>{@code Lms4jSwapOutAsync(x: T) -> y: T}: returns at once and leaves the copy to the
 *       library's copy thread, so it overlaps with compute; the device tensor is held until the
 *       copy is done, and a swap-in (or the release of {@code y}) waits for it.</li>
 *   <li>{@code Lms4jSwapOutDisk(x: T, path) -> handle: int64} / {@code Lms4jSwapInDisk(handle,
 *       T, path) -> y: T}: stream the bytes to a file and back; the file is deleted when the
 *       handle's last reader has run.</li>
 *   <li>{@code Lms4jSwapStats() -> int64[13]}: the library's counters ({@link Stats}).</li>
 * </ul>
 *
 * <p>{@link #load()} extracts the library and loads it with {@link TensorFlow#loadLibrary} once
 * per JVM; when that is impossible (other OS, built without gcc, load error) it logs why once
 * and returns false, and lms4j uses the standard-op path. Any JVM that imports a graph holding
 * these ops must load the library first: {@link #ensureLoadedFor(GraphDef)}.
 *
 * <pre>{@code
 * if (NativeSwap.load()) { ... NativeSwap.stats().hostLiveBytes() ... }
 * }</pre>
 */
public final class NativeSwap {
  private static final Logger LOG = LoggerFactory.getLogger(NativeSwap.class);
  /** Where the library sits in the jar. */
  public static final String RESOURCE = "/dev/lms4j/tf/native/linux-x86_64/liblms4jswap.so";
  /** Environment variable that, set to {@code off}, keeps the library from loading. */
  public static final String DISABLE_ENV = "LMS4J_NATIVE_SWAP";
  /** Op names. */
  public static final String SWAP_OUT = "Lms4jSwapOut";
  /** Op names. */
  public static final String SWAP_IN = "Lms4jSwapIn";
  /** Op names. */
  public static final String SWAP_OUT_ASYNC = "Lms4jSwapOutAsync";
  /** Op names. */
  public static final String SWAP_OUT_DISK = "Lms4jSwapOutDisk";
  /** Op names. */
  public static final String SWAP_IN_DISK = "Lms4jSwapInDisk";
  /** Op names. */
  public static final String STATS = "Lms4jSwapStats";
  /**
   * {@code Lms4jMemcpyBench(bytes: int64) -> ns: int64[2]}: nanoseconds of one glibc memcpy of
   * {@code bytes} between two warm buffers, and of it plus the copy back (for benchmarks).
   */
  public static final String MEMCPY_BENCH = "Lms4jMemcpyBench";
  /**
   * Bandwidth of one direction of a native host swap, bytes/s, for the cost model (see
   * docs/native-swap.md). {@code ./lms4j bench --suite native} measured 15.1 GB/s for a
   * swap-out alone and 8.15 GB/s for a round trip counted over both copies, so about 15 GB/s
   * each way; 8 GB/s is kept on purpose: priced at 15, auto's plan for the zoo's unet3d at 18 MiB
   * swapped a 3 MiB concat whose swap-in TensorFlow's executor ran beside the slices of its
   * gradient (an order the level schedule does not predict): 18.0 MiB measured against 14 MiB
   * predicted, out of memory at 18. The higher price keeps swaps to tensors with room to spare.
   */
  public static final double HOST_BANDWIDTH = 8e9;
  /**
   * Bandwidth of one direction of a native disk-tier swap, bytes/s, for the cost model: the
   * round trip {@code ./lms4j bench --suite native} measured (2.59 GB/s for a 256 MiB tensor
   * written with write(2) and read back through the page cache; the swap-out alone ran 2.98),
   * priced each way as the host tier's is.
   */
  public static final double DISK_BANDWIDTH = 2.59e9;
  /**
   * The same for the standard-op disk tier ({@code SerializeTensor} + {@code WriteFile}, {@code
   * ReadFile} + {@code ParseTensor}): 0.36 GB/s round trip in the same benchmark.
   */
  public static final double STANDARD_DISK_BANDWIDTH = 0.36e9;

  private static boolean attempted;
  private static boolean loaded;
  private static String reason = "not tried yet";

  private NativeSwap() {}

  /** True on linux-x86_64, the one platform lms4j's native libraries are built for. */
  public static boolean linuxX86() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    return os.contains("linux") && (arch.equals("amd64") || arch.equals("x86_64"));
  }

  /**
   * Loads the library once per JVM.
   *
   * @return true when the native ops are registered in this JVM
   */
  public static synchronized boolean load() {
    if (attempted) {
      return loaded;
    }
    attempted = true;
    try {
      String off = System.getenv(DISABLE_ENV);
      if (off != null && off.equalsIgnoreCase("off")) {
        throw new UnsupportedOperationException(DISABLE_ENV + "=off");
      }
      if (!linuxX86()) {
        throw new UnsupportedOperationException("built for linux-x86_64 only, this is "
            + System.getProperty("os.name") + "-" + System.getProperty("os.arch"));
      }
      Path lib;
      try (InputStream in = NativeSwap.class.getResourceAsStream(RESOURCE)) {
        if (in == null) {
          throw new UnsupportedOperationException("the jar holds no " + RESOURCE
              + " (the build found no gcc?)");
        }
        lib = Files.createTempFile("liblms4jswap", ".so");
        lib.toFile().deleteOnExit();
        Files.copy(in, lib, StandardCopyOption.REPLACE_EXISTING);
      }
      try {
        TensorFlow.loadLibrary(lib.toString());
      } finally {
        // once dlopen'd (or failed) the file is not needed: deleting it now leaves no copy in
        // the temp directory even when this JVM is killed later
        Files.deleteIfExists(lib);
      }
      loaded = true;
      reason = "loaded from " + lib;
      LOG.debug("native swap library {}", reason);
    } catch (IOException | RuntimeException | LinkageError e) {
      reason = e.getClass().getSimpleName() + ": " + e.getMessage();
      LOG.warn("lms4j native swap library unavailable ({}); swapping with standard "
          + "TensorFlow ops", reason);
    }
    return loaded;
  }

  /** True when {@link #load()} succeeded in this JVM. */
  public static synchronized boolean isLoaded() {
    return loaded;
  }

  /** Why the library is or is not loaded. */
  public static synchronized String status() {
    return reason;
  }

  /** True when the graph holds native swap ops. */
  public static boolean uses(GraphDef gd) {
    for (NodeDef n : gd.getNodeList()) {
      if (n.getOp().startsWith("Lms4jSwap")) {
        return true;
      }
    }
    return false;
  }

  /**
   * Loads the library when {@code gd} needs it; call before importing a graph.
   *
   * @throws IllegalStateException when the graph needs the library and it cannot be loaded
   */
  public static void ensureLoadedFor(GraphDef gd) {
    if (uses(gd) && !load()) {
      throw new IllegalStateException("the graph uses lms4j native swap ops but the native "
          + "library cannot be loaded here (" + status() + "); rewrite it with swap path "
          + "standard");
    }
  }

  /**
   * The library's counters.
   *
   * @param hostLiveBytes      bytes of host memory held by swapped tensors now
   * @param hostLiveBuffers    host buffers held now
   * @param hostPeakBytes      the most host bytes held at once since the library loaded
   * @param swapOuts           swap-outs run (host and disk)
   * @param swapIns            swap-ins run (host and disk)
   * @param swapInsCopiedInput host swap-ins whose input was not the swap-out's own buffer (TF
   *                           copied it on the way; expected 0)
   * @param diskLiveFiles      swap files on disk now
   * @param diskBytesWritten   bytes written to swap files
   * @param diskBytesRead      bytes read from swap files
   * @param hostFrees          host buffers freed
   * @param hostCachedBytes    freed host mappings kept for reuse by the next swap-outs of the
   *                           same size (unmapped after 10 s unused; {@code LMS4J_SWAP_CACHE_MB}
   *                           caps them, default 4096, 0 turns the cache off)
   * @param allocUnwaitedFailures failed allocations that did not wait TensorFlow's 10 s for
   *                           memory, in a worker that preloads {@link
   *                           dev.lms4j.tf.run.AllocatorRetry} (-1 in a process without it)
   * @param allocWaitedSuccesses failed allocations that succeeded after waiting for an
   *                           asynchronous swap-out's copy to end (-1 without the preload)
   */
  public record Stats(long hostLiveBytes, long hostLiveBuffers, long hostPeakBytes,
      long swapOuts, long swapIns, long swapInsCopiedInput, long diskLiveFiles,
      long diskBytesWritten, long diskBytesRead, long hostFrees, long hostCachedBytes,
      long allocUnwaitedFailures, long allocWaitedSuccesses) {}

  /**
   * Reads the counters (runs a one-op graph).
   *
   * @throws IllegalStateException when the library is not loaded
   */
  public static Stats stats() {
    if (!load()) {
      throw new IllegalStateException("native swap library not loaded: " + status());
    }
    try (Graph g = new Graph()) {
      g.importGraphDef(GraphDef.newBuilder().addNode(NodeDef.newBuilder().setName("stats")
          .setOp(STATS)).build());
      try (Session s = new Session(g);
           var r = s.runner().fetch("stats").run()) {
        TInt64 t = (TInt64) r.get(0);
        long[] v = new long[13];
        for (int i = 0; i < v.length; i++) {
          v[i] = t.getLong(i);
        }
        return new Stats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10],
            v[11], v[12]);
      }
    }
  }

  /**
   * Prints whether the library loads here and what {@link SwapPath#AUTO} resolves to (a
   * diagnostic: {@code java -cp ... dev.lms4j.tf.NativeSwap}).
   */
  public static void main(String[] args) {
    load();
    load(); // a second call neither retries nor logs again
    System.out.println("native swap library: " + (isLoaded() ? "loaded" : "unavailable") + " ("
        + status() + "); swap path auto -> " + SwapPath.AUTO.resolve(false));
  }

  /**
   * {@code cm} with each tier's bandwidth measured for the swap mechanism where the model's was
   * left at the default: the host tier at {@link #HOST_BANDWIDTH} on the native path (the
   * default is the standard ops'), the disk tier at {@link #DISK_BANDWIDTH} or {@link
   * #STANDARD_DISK_BANDWIDTH}.
   */
  public static dev.lms4j.core.memory.CostModel costModel(dev.lms4j.core.memory.CostModel cm,
      SwapRewriter.Mechanism mechanism) {
    boolean standard = mechanism == SwapRewriter.Mechanism.STANDARD;
    dev.lms4j.core.memory.CostModel out = cm;
    if (!standard && out.swapBandwidth() == dev.lms4j.core.memory.CostModel.defaults()
        .swapBandwidth()) {
      out = out.withSwapBandwidth(HOST_BANDWIDTH);
    }
    if (out.diskBandwidth() == dev.lms4j.core.memory.CostModel.DEFAULT_DISK_BANDWIDTH) {
      out = out.withTier(dev.lms4j.core.memory.Tier.DISK, standard ? STANDARD_DISK_BANDWIDTH
          : DISK_BANDWIDTH, out.diskLatencyUs());
    }
    return out;
  }
}
