package dev.lms4j.tf.run;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link BfcDump} on dumps TensorFlow's BFC allocator logged on this machine (TF Java 1.1), with
 * the per-chunk lines of 256-byte chunks left out to keep the files short.
 */
class BfcDumpTest {
  private static final long MIB = 1L << 20;

  private static List<String> lines(String name) throws IOException {
    try (InputStream in = BfcDumpTest.class.getResourceAsStream(name)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8).lines().toList();
    }
  }

  /**
   * The corpus encoder's auto plan for 60 MiB, out of memory allocating 4 KiB in its
   * SoftmaxCrossEntropyWithLogits: every byte of five regions in use, 6.8 MiB of it slack of
   * whole chunks, most of that one 19.8 MiB chunk holding a 15.6 MiB tensor.
   */
  @Test
  void theEncodersDumpAt60MiB() throws IOException {
    BfcDump d = BfcDump.parse(lines("bfc-dump-encoder-60mib.txt"));
    assertThat(d.regionBytes()).containsExactly(30 * MIB, 16 * MIB, 8 * MIB, 4 * MIB, 2 * MIB);
    assertThat(d.limitBytes()).isEqualTo(60 * MIB);
    assertThat(d.inUseChunks()).isEqualTo(965);
    assertThat(d.inUseBytes() / (double) MIB).isCloseTo(60.0, within(0.05));
    assertThat(d.requestedBytes() / (double) MIB).isCloseTo(53.2, within(0.05));
    assertThat(d.slackBytes() / (double) MIB).isCloseTo(6.8, within(0.05));
    assertThat(d.worstBinBytes()).isEqualTo(16 * MIB);
    assertThat(d.worstBinChunks()).isEqualTo(1);
    assertThat(d.worstBinInUse() / (double) MIB).isCloseTo(19.80, within(0.01));
    assertThat(d.worstBinRequested() / (double) MIB).isCloseTo(15.62, within(0.01));
    assertThat(d.largestFreeBytes()).isZero();
    assertThat(d.describe()).isEqualTo("allocator at the failure: regions 30, 16, 8, 4, 2 of a "
        + "60 MiB limit; 60.0 MiB in 965 chunks in use for 53.2 MiB requested (6.8 MiB in whole "
        + "chunks, most in bin 16 MiB: 1 of 19.8 MiB for 15.6 MiB); largest free chunk 0 MiB");
  }

  /** GPT-2 b4 under 3 MiB (it trains at 4): two regions, one free chunk too small for 32 KiB. */
  @Test
  void gpt2sDumpAt3MiB() throws IOException {
    List<String> l = lines("bfc-dump-gpt2-3mib.txt");
    BfcDump d = BfcDump.parse(l);
    assertThat(d.regionBytes()).containsExactly(2 * MIB, MIB);
    assertThat(d.limitBytes()).isEqualTo(3 * MIB);
    assertThat(d.largestFreeBytes()).isEqualTo(32256);
    assertThat(d.inUseBytes() / (double) MIB).isCloseTo(2.97, within(0.01));
    assertThat(BfcDump.isEnd(l.get(l.size() - 1))).isTrue();
    assertThat(l.stream().filter(BfcDump::isEnd)).hasSize(1);
  }

  @Test
  void noDumpIsNull() {
    assertThat(BfcDump.parse(List.of("Allocator ran out of memory trying to allocate 4.0KiB"))).isNull();
  }

  @Test
  void tensorFlowsSizes() {
    assertThat(BfcDump.bytes("0B")).isZero();
    assertThat(BfcDump.bytes("5.1KiB")).isEqualTo(5222);
    assertThat(BfcDump.bytes("1.66MiB")).isEqualTo(Math.round(1.66 * MIB));
    assertThat(BfcDump.bytes("2.0GiB")).isEqualTo(2L << 30);
  }
}
