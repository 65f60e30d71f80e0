package dev.lms4j.tf;

import dev.lms4j.core.memory.Tier;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.types.TFloat32;

/**
 * The child JVM of {@link NativeSwapMappingsTest}, started with {@code LMS4J_SWAP_MAPS=memfd} so
 * that the native library's host buffers show in {@code /proc/self/maps} as
 * {@code /memfd:lms4j-swap}. For the sync and the async host swap-out it runs 20 good steps and
 * one failing step of {@link NativeSwapTest#failingGraph}, and prints after each what the
 * process's mappings hold, as lines {@code maps LABEL COUNT BYTES LIVE_BUFFERS CACHED_BYTES}
 * (the last two from the library's counters, for the message only); then it polls the mappings
 * every 250 ms for up to 20 s ({@code maps idle MS COUNT BYTES ...}) until none is left.
 * Exits 3 when the library does not load.
 */
final class NativeSwapMappingsChild {
  /** How the process's maps name the library's memfd-backed mappings. */
  static final String NAME = "/memfd:lms4j-swap";

  private NativeSwapMappingsChild() {}

  public static void main(String[] args) throws Exception {
    if (!NativeSwap.load()) {
      System.err.println("native swap library not loaded: " + NativeSwap.status());
      System.exit(3);
    }
    Path dir = Path.of(args[0]);
    report("before");
    for (String op : List.of(NativeSwap.SWAP_OUT, NativeSwap.SWAP_OUT_ASYNC)) {
      GraphDef gd = NativeSwapTest.failingGraph(Tier.HOST, op, dir);
      try (Graph g = new Graph()) {
        g.importGraphDef(gd);
        try (Session s = new Session(g, SessionConfigs.lms())) {
          for (int step = 0; step < 20; step++) {
            try (TFloat32 ok = TFloat32.scalarOf(1f);
                 Result r = s.runner().feed("p", ok).fetch("sum").run()) {
              if (((TFloat32) r.get(0)).getFloat() != 1024f * 1024f) {
                System.out.println("maps wrong-sum " + op);
              }
            }
            report("step " + op + "#" + step);
          }
          boolean failed = false;
          try (TFloat32 nan = TFloat32.scalarOf(Float.NaN);
               Result r = s.runner().feed("p", nan).fetch("sum").run()) {
            // must not get here
          } catch (RuntimeException e) {
            failed = e.getMessage() != null && e.getMessage().contains("lms4j test check");
          }
          if (!failed) {
            System.out.println("maps not-failed " + op);
          }
          // right after the failed run, with the session still open
          report("failed " + op);
        }
      }
      report("closed " + op);
    }
    long t0 = System.nanoTime();
    while (true) {
      long ms = (System.nanoTime() - t0) / 1_000_000;
      long[] m = mappings();
      report("idle " + ms);
      if (m[0] == 0 || ms > 20_000) {
        break;
      }
      Thread.sleep(250);
    }
  }

  private static void report(String label) throws IOException {
    long[] m = mappings();
    NativeSwap.Stats st = NativeSwap.stats();
    System.out.println("maps " + label + " " + m[0] + " " + m[1] + " " + st.hostLiveBuffers()
        + " " + st.hostCachedBytes());
  }

  /** {count, bytes} of this process's mappings named {@link #NAME}. */
  static long[] mappings() throws IOException {
    long count = 0;
    long bytes = 0;
    for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
      if (line.contains(NAME)) {
        String[] range = line.substring(0, line.indexOf(' ')).split("-");
        count++;
        bytes += Long.parseUnsignedLong(range[1], 16) - Long.parseUnsignedLong(range[0], 16);
      }
    }
    return new long[] {count, bytes};
  }
}
