package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Session;

/** The files backend: the shared contract, plus its manifest, per-file checks and leftovers. */
class FilesBackendTest extends CheckpointBackendContractTest {
  @Override
  String backendName() {
    return "files";
  }

  @Override
  Path dataFile(CheckpointInfo info) {
    return Path.of(info.location()).resolve("t00003.bin"); // i64
  }

  /** NaN payloads and -0.0 survive the round trip bit for bit. */
  @Test
  void nanPayloadAndNegativeZeroSurvive() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      Checkpoints.save(s, names, 42, Map.of(), b);
      s.run("init_b");
      Checkpoints.load(s, names, b);
      ByteBuffer f = ByteBuffer.wrap(TestGraphs.values(s, names).get("f32"))
          .order(java.nio.ByteOrder.nativeOrder());
      assertThat(f.getInt(0)).isEqualTo(0x7fc00123);
      assertThat(f.getInt(4)).isEqualTo(0x80000000);
    }
  }

  @Test
  void manifestListsNamesShapesDtypesSizesAndCrc32c() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      CheckpointInfo info = Checkpoints.save(s, names, 7, Map.of(), b);
      Path ckpt = Path.of(info.location());
      assertThat(ckpt.getFileName().toString()).isEqualTo("ckpt-0000000007");
      JsonNode m = new ObjectMapper().readTree(ckpt.resolve("manifest.json").toFile());
      assertThat(m.path("format").asText()).isEqualTo("lms4j-files/1");
      assertThat(m.path("step").asLong()).isEqualTo(7);
      JsonNode t = m.path("tensors");
      assertThat(t.size()).isEqualTo(names.size());
      for (int i = 0; i < names.size(); i++) {
        JsonNode e = t.get(i);
        Object[] spec = TestGraphs.VARS.get(names.get(i));
        assertThat(e.path("name").asText()).isEqualTo(names.get(i));
        assertThat(e.path("dtype").asText()).isEqualTo(spec[0].toString());
        long[] shape = (long[]) spec[1];
        assertThat(e.path("shape").size()).isEqualTo(shape.length);
        byte[] content = Files.readAllBytes(ckpt.resolve(e.path("file").asText()));
        assertThat(content).isEqualTo(TestGraphs.bytes((DType) spec[0], shape, 1));
        assertThat(e.path("bytes").asLong()).isEqualTo(content.length);
        CRC32C crc = new CRC32C();
        crc.update(content);
        assertThat(e.path("crc32c").asLong()).isEqualTo(crc.getValue());
      }
    }
  }

  @Test
  void aFlippedByteIsRefusedNamingTensorAndFileAndVariablesStayUntouched() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      CheckpointInfo info = Checkpoints.save(s, names, 1, Map.of(), b);
      Path file = Path.of(info.location()).resolve("t00003.bin"); // i64
      try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
        f.seek(13);
        int x = f.read();
        f.seek(13);
        f.write(x ^ 0x10);
      }
      s.run("init_b");
      Map<String, byte[]> before = TestGraphs.values(s, names);
      assertThatThrownBy(() -> Checkpoints.load(s, names, b))
          .isInstanceOf(CorruptCheckpointException.class)
          .hasMessageContaining("checksum mismatch")
          .hasMessageContaining("'i64'")
          .hasMessageContaining("t00003.bin");
      Map<String, byte[]> after = TestGraphs.values(s, names);
      for (String n : names) {
        assertThat(after.get(n)).as(n).isEqualTo(before.get(n));
      }
    }
  }

  @Test
  void truncatedAndMissingFilesAreRefused() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      CheckpointInfo info = Checkpoints.save(s, names, 1, Map.of(), b);
      Path f32 = Path.of(info.location()).resolve("t00000.bin");
      try (RandomAccessFile f = new RandomAccessFile(f32.toFile(), "rw")) {
        f.setLength(f.length() - 4);
      }
      assertThatThrownBy(() -> Checkpoints.load(s, names, b))
          .isInstanceOf(CorruptCheckpointException.class)
          .hasMessageContaining("'f32'").hasMessageContaining("t00000.bin")
          .hasMessageContaining("56 bytes but the manifest says 60 (truncated)");
      Files.delete(f32);
      assertThatThrownBy(() -> Checkpoints.load(s, names, b))
          .isInstanceOf(CorruptCheckpointException.class)
          .hasMessageContaining("t00000.bin of tensor 'f32' is missing");
    }
  }

  @Test
  void keepNLeavesOnlyTheKeptDirectories() throws IOException {
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("keep=2")) {
      s.run("init_a");
      for (long step = 1; step <= 5; step++) {
        Checkpoints.save(s, TestGraphs.names(), step * 10, Map.of(), b);
      }
      try (Stream<Path> st = Files.list(dir)) {
        assertThat(st.map(p -> p.getFileName().toString()).sorted())
            .containsExactly("ckpt-0000000040", "ckpt-0000000050");
      }
    }
  }

  @Test
  void leftoversOfACrashedWriterAreNeverListedAndAreRemovedOnOpen() throws IOException {
    Path tmp = Files.createDirectories(dir.resolve(".tmp-ckpt-0000000009-x"));
    Files.write(tmp.resolve("manifest.json"), "{}".getBytes());
    Files.createDirectories(dir.resolve("ckpt-junk"));
    try (CheckpointBackend b = open("")) {
      assertThat(b.list()).isEmpty();
      assertThat(tmp).doesNotExist();
    }
  }

  @Test
  void badParametersAreRefusedClearly() {
    assertThatThrownBy(() -> CheckpointBackends.open("files", ""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("parameter 'dir' is required");
    assertThatThrownBy(() -> CheckpointBackends.open("files", "dir=" + dir + ",kep=3"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unknown parameter 'kep'")
        .hasMessageContaining("dir, fsync, keep, threads");
    assertThatThrownBy(() -> CheckpointBackends.open("files", "dir=" + dir + ",keep=-1"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'keep' must be >= 0, got -1");
    assertThatThrownBy(() -> CheckpointBackends.open("files", "dir=" + dir + ",threads=x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'threads' must be an integer, got 'x'");
    assertThatThrownBy(() -> CheckpointBackends.open("files", "{\"dir\": "))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not valid JSON");
  }

  @Test
  void jsonParametersWork() throws IOException {
    try (CheckpointBackend b = CheckpointBackends.open("files",
        "{\"dir\":\"" + dir + "\",\"keep\":1,\"fsync\":false}")) {
      assertThat(b.name()).isEqualTo("files");
      assertThat(b.toString()).contains("keep=1");
    }
  }

  private static List<TensorView> bigViews(int n, int bytes, byte fill) {
    List<TensorView> out = new java.util.ArrayList<>();
    for (int i = 0; i < n; i++) {
      ByteBuffer b = ByteBuffer.allocateDirect(bytes);
      for (int j = 0; j < bytes; j += 4096) {
        b.put(j, fill);
      }
      out.add(TensorView.of("t" + i, DType.UINT8, new long[] {bytes}, b));
    }
    return out;
  }

  /**
   * A load refused for one target reads into none: the caller frees the targets when load
   * throws, so a reader still running then would write into freed memory (this once corrupted
   * the native heap of the test JVM).
   */
  @Test
  void aRefusedLoadReadsIntoNoTarget() throws IOException {
    try (CheckpointBackend b = open("fsync=false")) {
      CheckpointInfo info = b.save(3, Map.of(), bigViews(4, 4 << 20, (byte) 7));
      List<TensorView> targets = new java.util.ArrayList<>(bigViews(4, 4 << 20, (byte) 0));
      targets.add(TensorView.of("absent", DType.UINT8, new long[] {1},
          ByteBuffer.allocateDirect(1)));
      assertThatThrownBy(() -> b.load(info, targets)).isInstanceOf(IOException.class)
          .hasMessageContaining("no tensor 'absent'");
      List<TensorView> wrongShape = bigViews(4, 4 << 20, (byte) 0);
      wrongShape.set(3, TensorView.of("t3", DType.UINT8, new long[] {1},
          ByteBuffer.allocateDirect(1)));
      assertThatThrownBy(() -> b.load(info, wrongShape))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'t3'");
      for (List<TensorView> ts : List.of(targets, wrongShape)) {
        for (TensorView t : ts) {
          ByteBuffer d = t.data();
          for (int j = 0; j < d.capacity(); j += 4096) {
            assertThat(d.get(j)).as(t.name()).isZero();
          }
        }
      }
      b.load(info, bigViews(4, 4 << 20, (byte) 0)); // and the checkpoint itself is fine
    }
  }

  /**
   * An interrupted save waits for its writers before it throws (they read the tensors' memory,
   * which the caller may free right after), leaves no checkpoint and keeps the interrupt.
   */
  @Test
  void anInterruptedSaveWaitsForItsWritersAndLeavesNothing() throws IOException {
    try (CheckpointBackend b = open("fsync=false")) {
      List<TensorView> views = bigViews(6, 4 << 20, (byte) 1);
      Thread.currentThread().interrupt();
      try {
        assertThatThrownBy(() -> b.save(5, Map.of(), views)).isInstanceOf(IOException.class)
            .hasMessageContaining("interrupted while writing 6 tensors");
        assertThat(Thread.currentThread().isInterrupted()).isTrue();
      } finally {
        Thread.interrupted();
      }
      assertThat(b.list()).isEmpty();
      try (Stream<Path> st = Files.list(dir)) {
        assertThat(st).isEmpty();
      }
    }
  }

}
