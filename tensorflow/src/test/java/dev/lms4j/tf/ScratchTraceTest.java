package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.proto.AllocatorMemoryUsed;
import org.tensorflow.proto.DeviceStepStats;
import org.tensorflow.proto.NodeExecStats;
import org.tensorflow.proto.StepStats;

/** Reading step statistics into per-op scratch, and the map into the graph model. */
class ScratchTraceTest {
  private static final long MIB = 1L << 20;

  private static NodeExecStats node(String name, String type, long start, long inUse, long peak,
      long live) {
    NodeExecStats.Builder b = NodeExecStats.newBuilder().setNodeName(name)
        .setTimelineLabel(name + " = " + type + "(x)").setAllStartMicros(start)
        .setAllEndRelMicros(5);
    if (inUse >= 0) {
      b.addMemory(AllocatorMemoryUsed.newBuilder().setAllocatorName("bfc")
          .setAllocatorBytesInUse(inUse).setPeakBytes(peak).setLiveBytes(live));
    }
    return b.build();
  }

  /**
   * relu (in use 10 MiB after, allocated 2 MiB it keeps), dw (a filter gradient: held 30 MiB at
   * its peak, kept 1 MiB: 29 MiB scratch), noop (no memory statistics at all), then relu again
   * in a later frame with a smaller peak. Listed out of order: the trace sorts by start.
   */
  private static StepStats stats() {
    return StepStats.newBuilder().addDevStats(DeviceStepStats.newBuilder().setDevice("cpu")
        .addNodeStats(node("dw", "Conv2DBackpropFilter", 200, 11 * MIB, 30 * MIB, MIB))
        .addNodeStats(node("relu", "Relu", 100, 10 * MIB, 2 * MIB, 2 * MIB))
        .addNodeStats(node("noop", "NoOp", 300, -1, 0, 0))
        .addNodeStats(node("relu", "Relu", 400, 9 * MIB, 3 * MIB, MIB)))
        .build();
  }

  @Test
  void scratchIsPeakMinusLivePerOpInExecutionOrder() {
    ScratchTrace t = ScratchTrace.of(stats());
    assertThat(t.nodes()).extracting(ScratchTrace.Node::name)
        .containsExactly("relu", "dw", "noop", "relu");
    assertThat(t.nodes().get(1).type()).isEqualTo("Conv2DBackpropFilter");
    // relu's second run held 2 MiB beyond its output: an op run twice keeps its largest
    assertThat(t.scratchByOp()).containsExactlyInAnyOrderEntriesOf(java.util.Map.of(
        "relu", 2 * MIB, "dw", 29 * MIB, "noop", 0L));
    // noop allocated nothing: the bytes in use stay at dw's
    assertThat(t.nodes().get(2).bytesInUse()).isEqualTo(11 * MIB);
    assertThat(t.peakBytesInUse()).isEqualTo(11 * MIB);
    // while dw ran: 10 MiB in use before it plus its 30 MiB high-water mark
    assertThat(t.peakBytesWithScratch()).isEqualTo(40 * MIB);
  }

  @Test
  void aTraceFileRoundTripsAndABadRowIsNamed(@TempDir Path dir) throws Exception {
    ScratchTrace t = ScratchTrace.of(stats());
    Path f = dir.resolve("trace.tsv");
    t.write(f);
    assertThat(ScratchTrace.read(f).nodes()).isEqualTo(t.nodes());
    Files.writeString(f, "#header\n100\trelu\tRelu\t10\tx\t2\t5\n");
    assertThatThrownBy(() -> ScratchTrace.read(f)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("trace.tsv:2");
  }

  @Test
  void theMapFeedsTheGraphModel() {
    DataflowGraph g = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(4 * MIB))
        .op("relu", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(4 * MIB))
        .op("dw", "Relu", OpCategory.BACKWARD, List.of("relu"), Tensor.ofBytes(MIB))
        .build();
    DataflowGraph measured = g.withScratch(ScratchTrace.of(stats()).scratchByOp());
    assertThat(measured.scratchBytes(measured.opOrThrow("dw").id())).isEqualTo(29 * MIB);
    assertThat(measured.scratchBytes(measured.opOrThrow("relu").id())).isEqualTo(2 * MIB);
  }
}
