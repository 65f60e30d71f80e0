package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Session;

class AsyncCheckpointerTest {
  @TempDir Path dir;

  /** Records saves; each save waits for {@code gate} and may fail. */
  static final class GatedBackend implements CheckpointBackend {
    final CountDownLatch entered = new CountDownLatch(1);
    volatile CountDownLatch gate = new CountDownLatch(0);
    volatile boolean fail;
    final List<Long> steps = new ArrayList<>();
    final List<byte[]> firstTensor = new ArrayList<>();

    @Override
    public String name() {
      return "gated";
    }

    @Override
    public CheckpointInfo save(long step, Map<String, String> md, List<TensorView> ts)
        throws IOException {
      entered.countDown();
      try {
        gate.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        throw new IOException(e);
      }
      if (fail) {
        throw new IOException("disk full");
      }
      byte[] b = new byte[(int) ts.get(0).byteSize()];
      ts.get(0).data().get(b);
      synchronized (this) {
        steps.add(step);
        firstTensor.add(b);
      }
      return new CheckpointInfo(step, md, ts.stream().map(TensorView::spec).toList(), "gated");
    }

    @Override
    public void load(CheckpointInfo c, List<TensorView> t) {
      throw new UnsupportedOperationException();
    }

    @Override
    public List<CheckpointInfo> list() {
      return List.of();
    }

    @Override
    public void close() {}
  }

  @Test
  void theSnapshotIsTakenAtSaveAndTrainingGoesOnWhileItIsWritten() throws Exception {
    GatedBackend b = new GatedBackend();
    b.gate = new CountDownLatch(1);
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        AsyncCheckpointer ckpt = AsyncCheckpointer.builder(b).build()) {
      s.run("init_a");
      byte[] a = TestGraphs.values(s, List.of("f32")).get("f32");
      assertThat(ckpt.save(s, TestGraphs.names(), 1, Map.of())).isTrue();
      assertThat(b.entered.await(10, TimeUnit.SECONDS)).isTrue();
      s.run("init_b"); // "training" changes the variables while the write is pending
      b.gate.countDown();
      ckpt.await();
      assertThat(b.steps).containsExactly(1L);
      assertThat(b.firstTensor.get(0)).isEqualTo(a); // the values at save time
      assertThat(ckpt.lastSaved().orElseThrow().step()).isEqualTo(1);
    }
  }

  @Test
  void skipsWhenAWriteIsStillPendingAndBlocksOtherwise() throws Exception {
    GatedBackend b = new GatedBackend();
    b.gate = new CountDownLatch(1);
    ByteBuffer buf = ByteBuffer.allocateDirect(64);
    List<TensorView> t = List.of(TensorView.of("x", DType.FLOAT32, new long[] {16}, buf));
    try (AsyncCheckpointer skip = AsyncCheckpointer.builder(b)
        .whenBusy(AsyncCheckpointer.WhenBusy.SKIP).build()) {
      assertThat(skip.save(1, Map.of(), t)).isTrue();
      assertThat(skip.save(2, Map.of(), t)).isFalse();
      assertThat(skip.skipped()).isEqualTo(1);
      b.gate.countDown();
      skip.await();
      assertThat(skip.save(3, Map.of(), t)).isTrue();
    }
    assertThat(b.steps).containsExactly(1L, 3L);

    GatedBackend b2 = new GatedBackend();
    b2.gate = new CountDownLatch(1);
    try (AsyncCheckpointer block = AsyncCheckpointer.builder(b2).build()) {
      assertThat(block.save(1, Map.of(), t)).isTrue();
      CompletableFuture<Boolean> second = CompletableFuture.supplyAsync(() -> {
        try {
          return block.save(2, Map.of(), t);
        } catch (IOException e) {
          throw new RuntimeException(e);
        }
      });
      Thread.sleep(200);
      assertThat(second).isNotDone(); // blocked behind the pending write
      b2.gate.countDown();
      assertThat(second.get(10, TimeUnit.SECONDS)).isTrue();
    }
    assertThat(b2.steps).containsExactly(1L, 2L);
  }

  @Test
  void theByteCapBoundsSnapshots() throws Exception {
    GatedBackend b = new GatedBackend();
    b.gate = new CountDownLatch(1);
    List<TensorView> t = List.of(TensorView.of("x", DType.FLOAT32, new long[] {16},
        ByteBuffer.allocateDirect(64)));
    try (AsyncCheckpointer c = AsyncCheckpointer.builder(b).maxPending(4).maxSnapshotBytes(100)
        .whenBusy(AsyncCheckpointer.WhenBusy.SKIP).build()) {
      assertThat(c.save(1, Map.of(), t)).isTrue();
      assertThat(c.save(2, Map.of(), t)).as("64 + 64 > 100 bytes").isFalse();
      b.gate.countDown();
      c.await();
      assertThatThrownBy(() -> c.save(3, Map.of(), List.of(TensorView.of("y", DType.INT64,
          new long[] {16}, ByteBuffer.allocateDirect(128)))))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("a snapshot of 128 bytes exceeds the cap of 100 bytes");
    }
    assertThatThrownBy(() -> AsyncCheckpointer.builder(b).maxPending(0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxPending");
  }

  @Test
  void aBackgroundFailureIsReportedOnTheNextCallAndOnClose() throws Exception {
    GatedBackend b = new GatedBackend();
    b.fail = true;
    List<TensorView> t = List.of(TensorView.of("x", DType.FLOAT32, new long[] {4},
        ByteBuffer.allocateDirect(16)));
    AsyncCheckpointer c = AsyncCheckpointer.builder(b).build();
    assertThat(c.save(7, Map.of(), t)).isTrue();
    assertThatThrownBy(() -> {
      c.await();
    }).isInstanceOf(IOException.class)
        .hasMessageContaining("the background checkpoint of step 7 failed: disk full");
    b.fail = false;
    assertThat(c.save(8, Map.of(), t)).isTrue(); // reported once, then it goes on
    c.await();
    b.fail = true;
    b.gate = new CountDownLatch(1);
    assertThat(c.save(9, Map.of(), t)).isTrue();
    CompletableFuture.runAsync(() -> {
      sleep(100);
      b.gate.countDown();
    });
    assertThatThrownBy(c::close).isInstanceOf(IOException.class)
        .hasMessageContaining("step 9 failed");
    c.close(); // idempotent
    assertThat(b.steps).containsExactly(8L);
    assertThatThrownBy(() -> c.save(10, Map.of(), t)).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void closeWaitsForThePendingWriteToTheFilesBackend() throws Exception {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend files = CheckpointBackends.open("files", "dir=" + dir)) {
      s.run("init_a");
      Map<String, byte[]> a = TestGraphs.values(s, names);
      AsyncCheckpointer c = AsyncCheckpointer.builder(files).build();
      for (long step = 1; step <= 3; step++) {
        assertThat(c.save(s, names, step, Map.of("step", "" + step))).isTrue();
      }
      c.close();
      assertThat(files.list()).extracting(CheckpointInfo::step).containsExactly(1L, 2L, 3L);
      s.run("init_b");
      Checkpoints.load(s, names, files);
      Map<String, byte[]> back = TestGraphs.values(s, names);
      for (String n : names) {
        assertThat(back.get(n)).as(n).isEqualTo(a.get(n));
      }
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
