package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import java.lang.ref.SoftReference;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.tensorflow.proto.GraphDef;

/**
 * The graph models {@link GraphImporter} made lately, by what they were made from: a GraphDef's
 * content (a SHA-256 of its bytes, so the cache holds no GraphDef), the feed shapes, the batch
 * size, the backward scope and the ops a step runs. One {@code rewrite} imports the same graph
 * several times (the allocator check plans again at another memory ratio, the offloads plan
 * again from the graph as given, each with the same rewrites before planning), and callers that
 * plan one graph for several budgets or modes import it again for each; a graph model is
 * immutable, and what is derived from it alone ({@link DataflowGraph#derived}: the buffer
 * owners, the levelled peak, the recompute walk's peaks) is then computed once for all of them.
 *
 * <p>At most {@link #CAPACITY} graphs, the least recently used out; each held softly, so the
 * collector may take them back under memory pressure. Two equal GraphDefs serialized in another
 * order only miss the cache.
 */
final class ImportCache {
  /** Graphs kept. */
  static final int CAPACITY = 8;

  /** What a graph model was made from. */
  record Key(boolean grouped, String digest, Map<String, List<Long>> feedShapes, int batchSize,
      String backwardScope, Set<String> runOps) {}

  private static final LinkedHashMap<Key, SoftReference<DataflowGraph>> GRAPHS =
      new LinkedHashMap<>(16, 0.75f, true);
  private static long hits;
  private static long misses;

  private ImportCache() {}

  static Key key(boolean grouped, GraphDef gd, Map<String, long[]> feedShapes, int batchSize,
      String backwardScope, Set<String> runOps) {
    Map<String, List<Long>> shapes = new TreeMap<>();
    for (Map.Entry<String, long[]> e : feedShapes.entrySet()) {
      List<Long> dims = new ArrayList<>();
      for (long d : e.getValue()) {
        dims.add(d);
      }
      shapes.put(e.getKey(), dims);
    }
    return new Key(grouped, digest(gd), shapes, batchSize, backwardScope, Set.copyOf(runOps));
  }

  /** The graph made for {@code key}, else {@code make}'s, kept for the next call. */
  static DataflowGraph get(Key key, Supplier<DataflowGraph> make) {
    synchronized (GRAPHS) {
      SoftReference<DataflowGraph> ref = GRAPHS.get(key);
      DataflowGraph g = ref == null ? null : ref.get();
      if (g != null) {
        hits++;
        return g;
      }
      misses++;
    }
    // made outside the lock: an import takes seconds, and two threads making the same graph
    // make equal ones
    DataflowGraph g = make.get();
    synchronized (GRAPHS) {
      GRAPHS.put(key, new SoftReference<>(g));
      while (GRAPHS.size() > CAPACITY) {
        GRAPHS.remove(GRAPHS.keySet().iterator().next());
      }
    }
    return g;
  }

  /** Lookups answered from the cache and made anew since the class was loaded. */
  static long[] counts() {
    synchronized (GRAPHS) {
      return new long[] {hits, misses};
    }
  }

  /** Forgets every graph (tests). */
  static void clear() {
    synchronized (GRAPHS) {
      GRAPHS.clear();
    }
  }

  private static String digest(GraphDef gd) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      gd.toByteString().asReadOnlyByteBufferList().forEach(md::update);
      return HexFormat.of().formatHex(md.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing from this JVM", e);
    }
  }
}
