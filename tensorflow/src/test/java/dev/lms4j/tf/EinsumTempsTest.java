package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** {@link EinsumTemps} against the allocator logs of traced einsums (float32, this machine). */
class EinsumTempsTest {
  private static final long MIB = 1 << 20;

  @Test
  void anOutputInAnotherOrderThanTheProductsIsCopied() {
    // traced: x [16, 256, 512], w [512, 8, 64]: the 8 MiB product, then the 8 MiB output (the
    // product's order is b, t, h, k); w is read adjoint (d is contracted, h and k are free)
    assertThat(EinsumTemps.bytes("btd,dhk->bhtk",
        List.of(new long[] {16, 256, 512}, new long[] {512, 8, 64}),
        new long[] {16, 8, 256, 64}, 4)).isEqualTo(8 * MIB);
  }

  @Test
  void operandsAndOutputInTheProductsOrderNeedNothing() {
    // traced: attention scores, q [16, 8, 256, 64] with itself: the 32 MiB output only
    assertThat(EinsumTemps.bytes("bhtk,bhsk->bhts",
        List.of(new long[] {16, 8, 256, 64}, new long[] {16, 8, 256, 64}),
        new long[] {16, 8, 256, 256}, 4)).isZero();
  }

  @Test
  void anOperandInNoOrderTheProductReadsIsCopied() {
    // b is a batch label last in the second operand: neither (batch, free, contract) nor
    // (batch, contract, free); the output is in the product's order
    assertThat(EinsumTemps.bytes("bij,jkb->bik",
        List.of(new long[] {4, 8, 16}, new long[] {16, 32, 4}),
        new long[] {4, 8, 32}, 4)).isEqualTo(16L * 32 * 4 * 4);
  }

  @Test
  void equationsTheRuleDoesNotCoverGetNothing() {
    assertThat(EinsumTemps.bytes("...ij,...jk->...ik",
        List.of(new long[] {2, 3, 4}, new long[] {2, 4, 5}), new long[] {2, 3, 5}, 4)).isZero();
    assertThat(EinsumTemps.bytes("ii,ij->ij",
        List.of(new long[] {3, 3}, new long[] {3, 4}), new long[] {3, 4}, 4)).isZero();
    assertThat(EinsumTemps.bytes("ij,jk->ik",
        List.of(new long[] {-1, 3}, new long[] {3, 4}), new long[] {-1, 4}, 4)).isZero();
  }
}
