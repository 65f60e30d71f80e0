package dev.lms4j.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code files} backend: one raw file per tensor, written in parallel straight from the
 * tensor's memory, plus {@code manifest.json} with names, dtypes, shapes, byte lengths and a
 * CRC32C per tensor; crash-safe through {@link CheckpointDirs} (temp dir, fsync, atomic rename).
 *
 * <p>No copy in user space: a file is written with {@code FileChannel.write} from the view's
 * direct buffer (the tensor's memory) and read back with {@code FileChannel.read} into the
 * target's direct buffer; the CRC32C is computed over the same memory, chunk by chunk, just
 * before each chunk is written or just after it is read.
 */
final class FilesBackend implements CheckpointBackend {
  static final String NAME = "files";
  static final String FORMAT = "lms4j-files/1";
  static final String MANIFEST = "manifest.json";
  private static final Logger LOG = LoggerFactory.getLogger(FilesBackend.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int CHUNK = 8 << 20;

  private final Path root;
  private final int keep;
  private final boolean fsync;
  private final ExecutorService pool;
  private boolean closed;

  FilesBackend(Path root, int keep, int threads, boolean fsync) throws IOException {
    this.root = root;
    this.keep = keep;
    this.fsync = fsync;
    CheckpointDirs.open(root, keep);
    AtomicInteger n = new AtomicInteger();
    this.pool = Executors.newFixedThreadPool(threads, r -> {
      Thread t = new Thread(r, "lms4j-files-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public synchronized CheckpointInfo save(long step, Map<String, String> metadata,
      List<TensorView> tensors) throws IOException {
    checkOpen();
    if (step < 0) {
      throw new IllegalArgumentException("step must be >= 0, got " + step);
    }
    checkUniqueNames(tensors);
    long t0 = System.nanoTime();
    Path tmp = CheckpointDirs.newTemp(root, step);
    boolean done = false;
    try {
      List<Callable<Long>> writes = new ArrayList<>();
      for (int i = 0; i < tensors.size(); i++) {
        TensorView v = tensors.get(i);
        Path file = tmp.resolve(fileName(i));
        writes.add(() -> write(v, file));
      }
      long[] crcs = runAll(writes, tensors, "writing");
      if (fsync) {
        // fsync after all writes: the kernel writes back every file at once meanwhile, instead
        // of one file at a time (as dd conv=fsync does with one file)
        List<Callable<Long>> syncs = new ArrayList<>();
        for (int i = 0; i < tensors.size(); i++) {
          Path file = tmp.resolve(fileName(i));
          syncs.add(() -> {
            CheckpointDirs.fsync(file);
            return 0L;
          });
        }
        runAll(syncs, tensors, "syncing");
      }
      ObjectNode manifest = JSON.createObjectNode();
      manifest.put("format", FORMAT).put("step", step);
      ObjectNode md = manifest.putObject("metadata");
      new java.util.TreeMap<>(metadata).forEach(md::put);
      ArrayNode arr = manifest.putArray("tensors");
      List<TensorSpec> specs = new ArrayList<>();
      for (int i = 0; i < tensors.size(); i++) {
        TensorView v = tensors.get(i);
        long crc = crcs[i];
        ObjectNode t = arr.addObject();
        t.put("name", v.name()).put("dtype", v.dtype().manifestName());
        ArrayNode shape = t.putArray("shape");
        for (long d : v.shape()) {
          shape.add(d);
        }
        t.put("file", fileName(i)).put("bytes", v.byteSize()).put("crc32c", crc);
        specs.add(v.spec());
      }
      Path mf = tmp.resolve(MANIFEST);
      Files.write(mf, JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(manifest),
          StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
      if (fsync) {
        CheckpointDirs.fsync(mf);
      }
      Path dest = CheckpointDirs.commit(root, tmp, step);
      done = true;
      for (Path p : CheckpointDirs.prune(root, keep)) {
        LOG.debug("removed old checkpoint {}", p);
      }
      CheckpointInfo info = new CheckpointInfo(step, metadata, specs, dest.toString());
      LOG.debug("files: saved step {} ({} tensors, {} bytes) in {} ms to {}", step,
          tensors.size(), info.byteSize(), (System.nanoTime() - t0) / 1_000_000, dest);
      return info;
    } finally {
      if (!done) {
        try {
          CheckpointDirs.deleteTree(tmp);
        } catch (IOException e) {
          LOG.warn("could not remove the incomplete checkpoint {}: {}", tmp, e.toString());
        }
      }
    }
  }

  private static String fileName(int i) {
    return String.format(Locale.ROOT, "t%05d.bin", i);
  }

  private long write(TensorView v, Path file) throws IOException {
    CRC32C crc = new CRC32C();
    ByteBuffer data = v.data();
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW,
        StandardOpenOption.WRITE)) {
      int pos = 0;
      int size = data.capacity();
      while (pos < size) {
        int end = Math.min(size, pos + CHUNK);
        data.limit(end).position(pos);
        crc.update(data.duplicate());
        while (data.hasRemaining()) {
          ch.write(data);
        }
        pos = end;
      }
    }
    return crc.getValue();
  }

  /**
   * Runs one task per tensor on the pool and waits for every one of them to end, even when one
   * fails or this thread is interrupted: a task reads or writes the tensor's own memory, which the
   * caller frees as soon as this returns or throws, so no task may outlive the call (cancelling a
   * running task does not stop it, and {@code get()} on a cancelled future does not wait).
   *
   * @return each task's result, in order
   * @throws IOException the first failure, naming its tensor
   */
  private long[] runAll(List<? extends Callable<Long>> tasks, List<TensorView> tensors,
      String what) throws IOException {
    // save and load hold this backend's lock and checked it open, and close takes the lock:
    // the pool takes every task
    List<Future<Long>> futures = new ArrayList<>();
    for (Callable<Long> t : tasks) {
      futures.add(pool.submit(t));
    }
    long[] out = new long[futures.size()];
    IOException first = null;
    boolean interrupted = false;
    for (int i = 0; i < futures.size(); i++) {
      while (true) {
        try {
          out[i] = futures.get(i).get();
          break;
        } catch (InterruptedException e) {
          interrupted = true; // keep waiting: the task still uses the tensor's memory
        } catch (ExecutionException e) {
          if (first == null) {
            Throwable c = e.getCause();
            first = c instanceof CorruptCheckpointException cc ? cc
                : new IOException(what + " tensor '" + tensors.get(i).name() + "' failed: " + c,
                    c);
          }
          break;
        }
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
      if (first == null) {
        first = new IOException("interrupted while " + what + " " + futures.size()
            + " tensors (every one of them finished)");
      }
    }
    if (first != null) {
      throw first;
    }
    return out;
  }

  @Override
  public synchronized void load(CheckpointInfo checkpoint, List<TensorView> targets)
      throws IOException {
    checkOpen();
    Path dir = Path.of(checkpoint.location());
    Map<String, Entry> entries = readManifest(dir).entries;
    // every target is checked before any is read: a refusal must not leave a reader running
    // into memory the caller frees when this throws
    List<Callable<Long>> reads = new ArrayList<>();
    for (TensorView t : targets) {
      Entry e = entries.get(t.name());
      if (e == null) {
        throw new IOException("checkpoint " + dir + " has no tensor '" + t.name()
            + "' (it has: " + String.join(", ", entries.keySet()) + ")");
      }
      if (!e.spec.sameLayout(t.spec())) {
        throw new IllegalArgumentException("tensor '" + t.name() + "' is " + e.spec.dtype()
            + java.util.Arrays.toString(e.spec.shape()) + " in checkpoint " + dir
            + " but the target is " + t.dtype() + java.util.Arrays.toString(t.shape()));
      }
      reads.add(() -> {
        read(dir, e, t);
        return 0L;
      });
    }
    runAll(reads, targets, "reading");
  }

  private static void read(Path dir, Entry e, TensorView target) throws IOException {
    Path file = dir.resolve(e.file);
    long size;
    try {
      size = Files.size(file);
    } catch (NoSuchFileException ex) {
      throw new CorruptCheckpointException("checkpoint " + dir + ": file " + e.file
          + " of tensor '" + e.spec.name() + "' is missing");
    }
    if (size != e.spec.byteSize()) {
      throw new CorruptCheckpointException("checkpoint " + dir + ": file " + e.file
          + " of tensor '" + e.spec.name() + "' has " + size + " bytes but the manifest says "
          + e.spec.byteSize() + (size < e.spec.byteSize() ? " (truncated)" : " (too long)"));
    }
    CRC32C crc = new CRC32C();
    ByteBuffer data = target.data();
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      int pos = 0;
      int total = data.capacity();
      while (pos < total) {
        int end = Math.min(total, pos + CHUNK);
        data.limit(end).position(pos);
        while (data.hasRemaining()) {
          if (ch.read(data) < 0) {
            throw new CorruptCheckpointException("checkpoint " + dir + ": file " + e.file
                + " of tensor '" + e.spec.name() + "' ended after " + data.position()
                + " of " + total + " bytes (truncated)");
          }
        }
        data.position(pos);
        crc.update(data);
        pos = end;
      }
    }
    if (crc.getValue() != e.crc32c) {
      throw new CorruptCheckpointException(String.format(Locale.ROOT,
          "checkpoint %s: checksum mismatch in file %s of tensor '%s' (crc32c stored %08x, "
              + "computed %08x): the file is corrupted", dir, e.file, e.spec.name(), e.crc32c,
          crc.getValue()));
    }
  }

  @Override
  public List<CheckpointInfo> list() throws IOException {
    List<CheckpointInfo> out = new ArrayList<>();
    for (Path dir : CheckpointDirs.complete(root)) {
      try {
        out.add(readManifest(dir).info);
      } catch (IOException e) {
        if (Files.exists(dir)) {
          LOG.warn("skipping checkpoint {}: {}", dir, e.getMessage());
        } // else: removed by keep-last-N meanwhile
      }
    }
    return out;
  }

  private record Entry(TensorSpec spec, String file, long crc32c) {}

  private record Manifest(CheckpointInfo info, Map<String, Entry> entries) {}

  private static Manifest readManifest(Path dir) throws IOException {
    Path mf = dir.resolve(MANIFEST);
    JsonNode root;
    try {
      root = JSON.readTree(Files.readAllBytes(mf));
    } catch (NoSuchFileException e) {
      throw new CorruptCheckpointException("checkpoint " + dir + " has no " + MANIFEST);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new CorruptCheckpointException("checkpoint " + dir + ": " + MANIFEST
          + " is not valid JSON: " + e.getOriginalMessage());
    }
    if (!FORMAT.equals(root.path("format").asText())) {
      throw new CorruptCheckpointException("checkpoint " + dir + ": " + MANIFEST
          + " has format '" + root.path("format").asText() + "', expected " + FORMAT);
    }
    try {
      Map<String, String> md = new LinkedHashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = root.path("metadata").fields();
          it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        md.put(e.getKey(), e.getValue().asText());
      }
      Map<String, Entry> entries = new LinkedHashMap<>();
      List<TensorSpec> specs = new ArrayList<>();
      for (JsonNode t : root.path("tensors")) {
        long[] shape = new long[t.path("shape").size()];
        for (int i = 0; i < shape.length; i++) {
          shape[i] = t.path("shape").get(i).asLong();
        }
        TensorSpec spec = new TensorSpec(t.path("name").asText(),
            DType.fromName(t.path("dtype").asText()), shape, t.path("bytes").asLong());
        String file = t.path("file").asText();
        if (file.isEmpty() || file.contains("/") || file.startsWith(".")) {
          throw new IllegalArgumentException("bad file name '" + file + "'");
        }
        entries.put(spec.name(), new Entry(spec, file, t.path("crc32c").asLong()));
        specs.add(spec);
      }
      CheckpointInfo info = new CheckpointInfo(root.path("step").asLong(), md, specs,
          dir.toString());
      return new Manifest(info, entries);
    } catch (IllegalArgumentException e) {
      throw new CorruptCheckpointException("checkpoint " + dir + ": " + MANIFEST + " is invalid: "
          + e.getMessage());
    }
  }

  static void checkUniqueNames(List<TensorView> tensors) {
    Set<String> seen = new HashSet<>();
    for (TensorView v : tensors) {
      if (!seen.add(v.name())) {
        throw new IllegalArgumentException("tensor name '" + v.name() + "' appears twice");
      }
    }
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("the files backend on " + root + " is closed");
    }
  }

  @Override
  public synchronized void close() {
    if (!closed) {
      closed = true;
      // save and load hold this lock, so no task is running or queued here
      pool.shutdown();
    }
  }

  @Override
  public String toString() {
    return "files(" + root + ", keep=" + keep + ")";
  }
}
