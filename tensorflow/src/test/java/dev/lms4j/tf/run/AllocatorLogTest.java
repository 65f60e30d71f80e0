package dev.lms4j.tf.run;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.tf.AdamNetAccess;
import dev.lms4j.tf.TrainingGraph;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link AllocatorLog}: TensorFlow's own log of its budgeted allocator, read and replayed
 * through lms4j's allocator model.
 */
class AllocatorLogTest {
  private static final String P = "2026-12-05 05:07:00.563215: I external/local_xla/xla/tsl/"
      + "framework/bfc_allocator.cc:324] ";
  private static final String E = "2026-12-05 05:07:00.563277: I tensorflow/core/common_runtime/"
      + "executor.cc:878] ";

  /**
   * Lines as TensorFlow writes them (regions of two allocators, requests with their addresses,
   * the op running, the refusal): only the budgeted allocator's are read; each request gets its
   * region and offset, a release the request it frees, the refusal its size and op.
   */
  @Test
  void theLogsLinesBecomeRequestsPlacedInRegions() {
    List<String> lines = List.of(
        P + "Extending allocation by 2.00MiB bytes for bfc_cpu_allocator_for_gpu.",
        P + "Allocated memory at 0x7f0d881fe040 to 0x7f0d883fe040",
        E + "Process node: 12 step 2 {{node Conv2d}} = _MklNativeConv2D[T=DT_FLOAT](x, w)",
        P + "[mem-debug] AllocateRaw,bfc_cpu_allocator_for_gpu,1048576,0x7f0d881fe040,*** Begin",
        P + "Extending allocation by 2.00MiB bytes for mklcpu.",
        P + "Allocated memory at 0x7f44cc426b00 to 0x7f44cc626b00",
        P + "[mem-debug] AllocateRaw,mklcpu,2048,0x7f44cc426b00,*** Begin stack trace ***",
        E + "Process node: 13 step 2 {{node Relu}} = Relu[T=DT_FLOAT](Conv2d)",
        P + "[mem-debug] AllocateRaw,bfc_cpu_allocator_for_gpu,1000,0x7f0d882fe040,*** Begin",
        P + "[mem-debug] DeallocateRaw,bfc_cpu_allocator_for_gpu,1048576,0x7f0d881fe040,*** B",
        E + "Process node: 14 step 2 {{node MatMul}} = MatMul[T=DT_FLOAT](Relu, w2)",
        P.replace(":324] ", ":497] ").replace(" I ", " W ") + "Allocator (bfc_cpu_allocator_for_gpu) "
            + "ran out of memory trying to allocate 2.00MiB (rounded to 2097152)requested by op "
            + "MatMul",
        P + "[mem-debug] DeallocateRaw,bfc_cpu_allocator_for_gpu,1000,0x7f0d882fe040,*** B");
    AllocatorLog log = AllocatorLog.parse(lines);
    assertThat(log.regions()).containsExactly(2L << 20);
    assertThat(log.events()).containsExactly(
        new AllocatorLog.Alloc(1048576, 0, 0, "Conv2d"),
        new AllocatorLog.Alloc(1000, 0, 1048576, "Relu"),
        new AllocatorLog.Free(0),
        new AllocatorLog.Refused(2097152, "MatMul"));
    // the model does the same: the first MiB of the region, then the next chunk; 2 MiB refused
    // under 2 MiB (1 MiB free in one chunk, 1000 bytes in use)
    AllocatorLog.Check c = log.check(2L << 20);
    assertThat(c.same()).as(c.detail()).isTrue();
    assertThat(c.requests()).isEqualTo(2);
    // a log whose second chunk TensorFlow had put elsewhere: the model's first difference
    AllocatorLog moved = AllocatorLog.read(new BufferedReader(new StringReader(
        "R 2097152\nA 1048576 0 0 Conv2d\nA 1000 0 4096 Relu\n")));
    AllocatorLog.Check d = moved.check(2L << 20);
    assertThat(d.firstDiff()).isEqualTo(1);
    assertThat(d.detail()).isEqualTo("request 1 (1000 bytes, Relu): TensorFlow put it in region "
        + "0 at offset 4096, the model in region 0 at offset 1048576");
  }

  /**
   * Two runs TensorFlow logged here (the files' headers say how): replayed through the model,
   * every chunk lands in the same region at the same offset, the regions are the same, and the
   * request TensorFlow refused the model refuses too. (Regions lie each below the one grown
   * before, as the system's mmap places them: with the regions the other way up, best fit
   * between two free chunks of one size picks the other one, and 18 chunks of the U-Net's run
   * and 24 of the DenseNet's land elsewhere.)
   */
  @ParameterizedTest
  @CsvSource({"tf-bfc-unet-tflms-14mib.txt, 14, 647, false",
      "tf-bfc-densenet-tflms-32mib.txt, 32, 770, true"})
  void recordedRunsArePlacedChunkForChunkAsTensorFlowPlacedThem(String file, long limitMib,
      int granted, boolean refused) throws Exception {
    AllocatorLog log;
    try (BufferedReader r = new BufferedReader(new InputStreamReader(
        AllocatorLogTest.class.getResourceAsStream(file), StandardCharsets.UTF_8))) {
      log = AllocatorLog.read(r);
    }
    assertThat(log.events().stream().filter(e -> e instanceof AllocatorLog.Alloc).count())
        .isEqualTo(granted);
    assertThat(log.events().get(log.events().size() - 1) instanceof AllocatorLog.Refused)
        .isEqualTo(refused);
    AllocatorLog.Check c = log.check(limitMib << 20);
    assertThat(c.same()).as(c.detail()).isTrue();
    assertThat(c.requests()).isEqualTo(granted);
    assertThat(c.detail()).contains("in the same " + log.regions().size() + " regions");
    if (refused) {
      assertThat(c.detail()).endsWith("as TensorFlow did");
    }
  }

  /**
   * A real budgeted run of a small CNN with the log asked for: TensorFlow's requests are read
   * from the worker's output, written out, and the model places every one of them where
   * TensorFlow did.
   */
  @Test
  void aBudgetedRunsLogIsKeptAndTheModelPlacesItsRequestsAsTensorFlowDid(@TempDir Path dir)
      throws Exception {
    TrainingGraph tg = AdamNetAccess.cnn(8, 16, 8, 32);
    Path pb = dir.resolve("g.pb");
    Path mf = dir.resolve("g.json");
    tg.write(pb, mf);
    Path file = dir.resolve("alloc.log");
    WorkerProcess.Outcome o = WorkerProcess.run(StepWorker.class.getName(), List.of(
        pb.toString(), mf.toString(), "2", "42", "true", "DEFAULT_MEM_OPT"), 64,
        Duration.ofMinutes(5), n -> { }, l -> { }, null, file, true);
    assertThat(o.oom()).as(String.valueOf(o.message())).isFalse();
    assertThat(o.exitCode()).as(String.valueOf(o.message())).isZero();
    AllocatorLog log;
    try (BufferedReader r = Files.newBufferedReader(file)) {
      log = AllocatorLog.read(r);
    }
    long granted = log.events().stream().filter(e -> e instanceof AllocatorLog.Alloc).count();
    assertThat(granted).as("init and two steps").isGreaterThan(50);
    assertThat(log.regions()).isNotEmpty();
    assertThat(log.events()).filteredOn(e -> e instanceof AllocatorLog.Alloc)
        .allSatisfy(e -> assertThat(((AllocatorLog.Alloc) e).region()).isNotNegative());
    // the executor names the ops of the step
    assertThat(log.events()).anySatisfy(e -> assertThat(e).isInstanceOfSatisfying(
        AllocatorLog.Alloc.class, a -> assertThat(a.op()).startsWith("gradients/")));
    AllocatorLog.Check c = log.check(64L << 20);
    assertThat(c.same()).as(c.detail()).isTrue();
    assertThat(c.requests()).isEqualTo((int) granted);
  }

  /**
   * The allocator model's own requests ({@code BfcReplay.requests}, what {@code LMS4J_REPLAY_LOG}
   * writes) are in the log's format: read back and replayed, every chunk lands where the model
   * put it, in the regions it grew; a step that does not fit ends with its refusal.
   */
  @Test
  void theModelsRequestsReadBackAsALogAndReplayToTheSamePlaces() {
    long mib = 1 << 20;
    DataflowGraph g = SyntheticGraphs.trainingChain(6, 4 * mib, 64 << 10);
    int[] order = Levels.of(g).schedule();
    List<String> lines = new ArrayList<>();
    var r = BfcReplay.requests(g, order, 64 * mib, BfcReplay.Layout.GRAPH_ORDER, lines::add);
    assertThat(r.fits()).isTrue();
    assertThat(lines).anyMatch(l -> l.startsWith("R ")).anyMatch(l -> l.startsWith("F "));
    AllocatorLog log = AllocatorLog.read(new BufferedReader(new StringReader(
        String.join("\n", lines))));
    long granted = lines.stream().filter(l -> l.startsWith("A ")).count();
    assertThat(granted).isGreaterThan(6);
    AllocatorLog.Check c = log.check(64 * mib);
    assertThat(c.same()).as(c.detail()).isTrue();
    assertThat(c.requests()).isEqualTo((int) granted);
    // under a limit the step does not fit: the last line is the refusal, and the model agrees
    List<String> tight = new ArrayList<>();
    long need = BfcReplay.smallestMib(g, order, 64);
    var refused = BfcReplay.requests(g, order, (need - 1) * mib,
        BfcReplay.Layout.GRAPH_ORDER, tight::add);
    assertThat(refused.fits()).isFalse();
    assertThat(tight.get(tight.size() - 1)).startsWith("X " + refused.failedBytes() + " ");
    AllocatorLog.Check t = AllocatorLog.read(new BufferedReader(new StringReader(
        String.join("\n", tight)))).check((need - 1) * mib);
    assertThat(t.same()).as(t.detail()).isTrue();
  }
}
