package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TString;

class TensorViewTest {

  @Test
  void aViewIsTheTensorsOwnMemoryBothWays() {
    try (TFloat32 t = TFloat32.vectorOf(1f, 2f, 3f)) {
      TensorView v = TensorView.of("w", t);
      assertThat(v.dtype()).isEqualTo(DType.FLOAT32);
      assertThat(v.shape()).containsExactly(3);
      assertThat(v.byteSize()).isEqualTo(12);
      assertThat(v.address()).isNotZero().isEqualTo(NativeMemory.address(t));
      ByteBuffer b = v.data();
      assertThat(b.isDirect()).isTrue();
      assertThat(b.order()).isEqualTo(ByteOrder.nativeOrder());
      assertThat(b.getFloat(4)).isEqualTo(2f);
      b.putFloat(8, 42f);                  // write through the view ...
      assertThat(t.getFloat(2)).isEqualTo(42f); // ... shows in the tensor
      t.setFloat(7f, 0);                   // and the other way round
      assertThat(v.data().getFloat(0)).isEqualTo(7f);
    }
  }

  @Test
  void aFetchedRefVariableAliasesTheVariable() {
    // what the javadoc of TensorView says: save must finish before the next step
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g)) {
      s.run("init_a");
      try (Result r = s.runner().fetch("f32").run()) {
        TensorView v = TensorView.of("f32", r.get(0));
        byte[] before = new byte[(int) v.byteSize()];
        v.data().get(before);
        s.run("init_b");
        byte[] now = new byte[(int) v.byteSize()];
        v.data().get(now);
        assertThat(now).isEqualTo(TestGraphs.bytes(DType.FLOAT32, new long[] {3, 5}, 2))
            .isNotEqualTo(before);
      }
    }
  }

  @Test
  void hostBuffersAndErrors() {
    ByteBuffer heap = ByteBuffer.allocate(8);
    TensorView h = TensorView.of("h", DType.INT32, new long[] {2}, heap);
    assertThat(h.address()).isZero();
    assertThat(TensorView.of("d", DType.INT64, new long[] {1}, ByteBuffer.allocateDirect(8))
        .address()).isNotZero();
    assertThatThrownBy(() -> TensorView.of("x", DType.INT32, new long[] {3}, heap))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("tensor 'x': 8 bytes given but int32[3] needs 12");
    try (Tensor s = TString.vectorOf("a")) {
      assertThatThrownBy(() -> TensorView.of("s", s))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("unsupported tensor type DT_STRING");
    }
    try (Tensor e = Tensor.of(TFloat32.class, Shape.of(0, 4))) {
      assertThat(TensorView.of("empty", e).byteSize()).isZero();
    }
    assertThat(DType.fromName("BOOL")).isEqualTo(DType.BOOL);
    assertThatThrownBy(() -> DType.fromName("int8")).hasMessageContaining("unknown dtype 'int8'");
    assertThat(List.of(DType.values())).hasSize(9);
  }
}
