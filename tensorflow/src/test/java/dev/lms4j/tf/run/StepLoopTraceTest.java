package dev.lms4j.tf.run;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The op-type column of {@code LMS4J_DUMP_TRACE}, parsed from step-stats timeline labels. */
class StepLoopTraceTest {
  @Test
  void opTypeComesFromTheTimelineLabel() {
    // labels as TF 2.18 writes them: "name = Type(inputs)"; fused oneDNN kernels keep their
    // own type under the last fused op's name
    assertThat(StepLoop.opType("resnet/conv/BiasAdd = _MklNativeFusedConv2D(x, w, b)"))
        .isEqualTo("_MklNativeFusedConv2D");
    assertThat(StepLoop.opType("gradients/ReluGrad_3 = ReluGrad(g, y)")).isEqualTo("ReluGrad");
    assertThat(StepLoop.opType("_SOURCE = NoOp()")).isEqualTo("NoOp");
    assertThat(StepLoop.opType("")).isEmpty();
    assertThat(StepLoop.opType("no separator (here)")).isEmpty();
  }
}
