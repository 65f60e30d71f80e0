package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Session;

/**
 * What every checkpoint backend promises, run against each one by a subclass: bit-identical
 * round trips of every dtype (with step and metadata), keep-N (also at open), a step saved again
 * replaces the old one, the next step after the latest, a flipped byte refused naming the
 * checkpoint, a missing tensor named, unknown parameters refused, and {@code close()} idempotent
 * with a closed backend refusing work. Backend-specific layouts are tested in the subclasses.
 */
abstract class CheckpointBackendContractTest {
  @TempDir Path dir;

  /** The backend's registered name. */
  abstract String backendName();

  /** A file of the saved checkpoint that holds tensor bytes (where a flipped byte must show). */
  abstract Path dataFile(CheckpointInfo info);

  CheckpointBackend open(String extra) {
    return CheckpointBackends.open(backendName(), "dir=" + dir
        + (extra.isEmpty() ? "" : "," + extra));
  }

  @Test
  void roundTripIsBitIdenticalForEveryDtype() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      Map<String, byte[]> a = TestGraphs.values(s, names);
      CheckpointInfo saved = Checkpoints.save(s, names, 42, Map.of("loss", "0.5"), b);
      s.run("init_b");
      Map<String, byte[]> other = TestGraphs.values(s, names);
      CheckpointInfo loaded = Checkpoints.load(s, names, b);
      Map<String, byte[]> back = TestGraphs.values(s, names);
      assertThat(loaded).isEqualTo(saved);
      assertThat(loaded.step()).isEqualTo(42);
      assertThat(loaded.metadata()).containsExactly(Map.entry("loss", "0.5"));
      for (String n : names) {
        assertThat(back.get(n)).as(n).isEqualTo(a.get(n));
        if (!n.equals("scalar") && !n.equals("scope/b")) {
          assertThat(other.get(n)).as(n + " differs before the load").isNotEqualTo(a.get(n));
        }
      }
    }
  }

  @Test
  void keepsTheLastNReplacesASavedStepAndContinuesAfterTheLatest() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("keep=2")) {
      s.run("init_a");
      for (long step = 1; step <= 5; step++) {
        Checkpoints.save(s, names, step * 10, Map.of("i", "" + step), b);
      }
      assertThat(b.list()).extracting(CheckpointInfo::step).containsExactly(40L, 50L);
      Checkpoints.save(s, names, 50, Map.of("i", "again"), b);
      assertThat(b.latest().orElseThrow().metadata()).containsEntry("i", "again");
      assertThat(b.list()).extracting(CheckpointInfo::step).containsExactly(40L, 50L);
      assertThat(Checkpoints.save(s, names, b).step()).isEqualTo(51);
      assertThat(b.list()).extracting(CheckpointInfo::step).containsExactly(50L, 51L);
    }
  }

  /**
   * A writer killed between publishing a checkpoint and removing the oldest leaves one too many;
   * two such kills in a row left five checkpoints in a keep-last-3 directory
   * ({@code CrashSafetyTest}). Opened with keep=N, the backend keeps the newest N at once.
   */
  @Test
  void openingWithKeepNTrimsWhatAKilledWriterLeft() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g)) {
      s.run("init_a");
      try (CheckpointBackend all = open("keep=0")) {
        for (long step = 1; step <= 5; step++) {
          Checkpoints.save(s, names, step, Map.of(), all);
        }
        assertThat(all.list()).hasSize(5);
      }
      try (CheckpointBackend b = open("keep=3")) {
        assertThat(b.list()).extracting(CheckpointInfo::step).containsExactly(3L, 4L, 5L);
      }
      try (CheckpointBackend b = open("keep=0")) {
        assertThat(b.list()).extracting(CheckpointInfo::step).containsExactly(3L, 4L, 5L);
      }
    }
  }

  @Test
  void aFlippedByteIsRefusedNamingTheCheckpoint() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      CheckpointInfo info = Checkpoints.save(s, names, 1, Map.of(), b);
      try (RandomAccessFile f = new RandomAccessFile(dataFile(info).toFile(), "rw")) {
        f.seek(10);
        int x = f.read();
        f.seek(10);
        f.write(x ^ 0x01);
      }
      assertThatThrownBy(() -> Checkpoints.load(s, names, b))
          .isInstanceOf(CorruptCheckpointException.class)
          .hasMessageContaining(info.location());
    }
  }

  @Test
  void aMissingTensorIsAClearError() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      Checkpoints.save(s, List.of("f32"), 9, Map.of(), b);
      assertThatThrownBy(() -> Checkpoints.load(s, names, b))
          .isInstanceOf(IOException.class)
          .hasMessageContaining("f64");
    }
  }

  @Test
  void anUnknownParameterIsRefused() {
    assertThatThrownBy(() -> CheckpointBackends.open(backendName(), "dir=" + dir + ",kep=3"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unknown parameter 'kep'");
  }

  @Test
  void closeIsIdempotentAndAClosedBackendRefusesWork() throws IOException {
    CheckpointBackend b = open("");
    b.close();
    b.close();
    assertThatThrownBy(() -> b.save(1, Map.of(), List.of()))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
  }
}
