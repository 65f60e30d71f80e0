package dev.lms4j.tf.run;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The size of a failed allocation, read from the messages TensorFlow's allocators print. */
class ProbeMessagesTest {
  @Test
  void failedAllocationSizes() {
    // the BFC allocator's line as the worker supervisor keeps it (lenet at 88 MiB)
    assertThat(Probe.failedAllocation("OOM under a budget of 88 MiB: ran out of memory trying "
        + "to allocate 12.25MiB (rounded to 12845056)requested by op gradients/MatMul_3"))
        .isEqualTo(12_845_056L);
    assertThat(Probe.failedAllocation("ran out of memory trying to allocate 1.5KiB"))
        .isEqualTo(1536L);
    // the op's exception: 512 x 28 x 28 x 4 floats
    assertThat(Probe.failedAllocation("OOM when allocating tensor with shape[512,28,28,4] and "
        + "type float on /job:localhost/replica:0/task:0/device:CPU:0"))
        .isEqualTo(512L * 28 * 28 * 4 * 4);
    assertThat(Probe.failedAllocation("worker exited with code 134")).isEqualTo(-1);
    assertThat(Probe.failedAllocation(null)).isEqualTo(-1);
  }

  @Test
  void aGraphWithCollectivesCannotRunAlone() {
    var node = org.tensorflow.proto.NodeDef.newBuilder();
    var plain = org.tensorflow.proto.GraphDef.newBuilder()
        .addNode(node.setName("a").setOp("MatMul").build()).build();
    var collective = plain.toBuilder()
        .addNode(node.setName("b").setOp("CollectiveReduceV2").build()).build();
    assertThat(Probe.canRunAlone(plain)).isTrue();
    assertThat(Probe.canRunAlone(collective)).isFalse();
  }
}
