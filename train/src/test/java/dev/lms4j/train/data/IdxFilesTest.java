package dev.lms4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.ndarray.Shape;

/** The IDX reader and {@link FashionMnist} on small files the test writes itself. */
class IdxFilesTest {

  @TempDir
  Path dir;

  /** 3 images of 2 x 3 pixels: pixel values 0..17; labels 9, 0, 4. */
  private static final byte[] PIXELS = new byte[18];
  private static final byte[] LABELS = {9, 0, 4};

  static {
    for (int i = 0; i < PIXELS.length; i++) {
      PIXELS[i] = (byte) (i * 15); // 0, 15, ..., 255
    }
  }

  private void writeSplit(String split, boolean gzip) throws IOException {
    write(dir.resolve(split + "-images-idx3-ubyte" + (gzip ? ".gz" : "")), gzip,
        idx(0x803, new int[] {3, 2, 3}, PIXELS));
    write(dir.resolve(split + "-labels-idx1-ubyte" + (gzip ? ".gz" : "")), gzip,
        idx(0x801, new int[] {3}, LABELS));
  }

  static byte[] idx(int magic, int[] dims, byte[] data) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    out.writeInt(magic);
    for (int d : dims) {
      out.writeInt(d);
    }
    out.write(data);
    return bytes.toByteArray();
  }

  static void write(Path file, boolean gzip, byte[] content) throws IOException {
    try (OutputStream raw = Files.newOutputStream(file);
         OutputStream out = gzip ? new GZIPOutputStream(raw) : raw) {
      out.write(content);
    }
  }

  @Test
  void readsGzipFilesScalingPixelsAndOneHotEncodingLabels() throws IOException {
    writeSplit("train", true);
    writeSplit("t10k", true);
    assertThat(FashionMnist.available(dir)).isTrue();
    Dataset d = FashionMnist.train(dir);

    assertThat(d.size()).isEqualTo(3);
    assertThat(d.sampleShapes()).containsExactly(Shape.of(2, 3, 1), Shape.of(10));
    float[] image = new float[6];
    d.read(0, 1, image, 0);
    assertThat(image).containsExactly(90 / 255f, 105 / 255f, 120 / 255f, 135 / 255f, 150 / 255f,
        165 / 255f);
    d.read(0, 0, image, 0);
    assertThat(image[0]).isZero();
    d.read(0, 2, image, 0);
    assertThat(image[5]).isEqualTo(1f);

    float[] label = new float[12];
    Arrays.fill(label, 7f); // read must overwrite every element
    d.read(1, 0, label, 1);
    assertThat(label).containsExactly(7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 7f);
    assertThat(FashionMnist.test(dir).size()).isEqualTo(3);
  }

  @Test
  void readsUncompressedFilesToo() throws IOException {
    writeSplit("t10k", false);
    Dataset d = FashionMnist.test(dir);
    float[] label = new float[10];
    d.read(1, 2, label, 0);
    assertThat(label[4]).isEqualTo(1f);
    assertThat(FashionMnist.available(dir)).as("train files are missing").isFalse();
  }

  @Test
  void missingDirectoryOrFileIsNamed() throws IOException {
    assertThatThrownBy(() -> FashionMnist.train(dir.resolve("nope")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("nope").hasMessageContaining("does not exist")
        .hasMessageContaining("dataset-fashion-mnist");
    write(dir.resolve("train-images-idx3-ubyte.gz"), true,
        idx(0x803, new int[] {3, 2, 3}, PIXELS));
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("train-labels-idx1-ubyte.gz").hasMessageContaining("not found");
  }

  @Test
  void wrongMagicNumberIsReported() throws IOException {
    writeSplit("train", true);
    // labels where images belong: rank 1 instead of 3
    write(dir.resolve("train-images-idx3-ubyte.gz"), true, idx(0x801, new int[] {3}, LABELS));
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("train-images-idx3-ubyte.gz")
        .hasMessageContaining("magic number 0x00000801, expected 0x00000803");
    // not an IDX file at all
    write(dir.resolve("train-images-idx3-ubyte.gz"), true, "hello, world".getBytes());
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not an IDX file").hasMessageContaining("magic number");
    // floats (0x0d) instead of unsigned bytes
    write(dir.resolve("train-images-idx3-ubyte.gz"), true, idx(0xd03, new int[] {3, 2, 3},
        PIXELS));
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is not unsigned bytes");
  }

  @Test
  void sizeMismatchesAreReported() throws IOException {
    writeSplit("train", true);
    // header promises 4 images, data holds 3
    write(dir.resolve("train-images-idx3-ubyte.gz"), true,
        idx(0x803, new int[] {4, 2, 3}, PIXELS));
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("truncated").hasMessageContaining("[4, 2, 3]")
        .hasMessageContaining("need 24 bytes of data, found 18");
    // trailing garbage
    write(dir.resolve("train-images-idx3-ubyte.gz"), true,
        idx(0x803, new int[] {2, 2, 3}, PIXELS));
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("trailing bytes");
    // 3 images but 2 labels
    writeSplit("train", true);
    write(dir.resolve("train-labels-idx1-ubyte.gz"), true, idx(0x801, new int[] {2},
        new byte[] {1, 2}));
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("holds 3 images but").hasMessageContaining("holds 2 labels");
    // a label that is no class
    write(dir.resolve("train-labels-idx1-ubyte.gz"), true, idx(0x801, new int[] {3},
        new byte[] {1, 10, 2}));
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("label 10 of sample 1");
  }

  @Test
  void truncatedHeaderAndCorruptGzipAreReported() throws IOException {
    writeSplit("train", true);
    write(dir.resolve("train-images-idx3-ubyte.gz"), true,
        Arrays.copyOf(idx(0x803, new int[] {3, 2, 3}, PIXELS), 9));
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("truncated");
    byte[] gz;
    try (ByteArrayOutputStream b = new ByteArrayOutputStream();
         GZIPOutputStream g = new GZIPOutputStream(b)) {
      g.write(idx(0x803, new int[] {3, 2, 3}, PIXELS));
      g.finish();
      gz = b.toByteArray();
    }
    byte[] cut = Arrays.copyOf(gz, gz.length / 2);
    write(dir.resolve("train-images-idx3-ubyte.gz"), false, cut);
    assertThatThrownBy(() -> FashionMnist.train(dir))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("train-images-idx3-ubyte.gz");
  }
}
