package dev.lms4j.train.data;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.ndarray.Shape;

/**
 * Fashion-MNIST (Zalando; 60,000 training and 10,000 test grey images of 28 x 28 pixels, 10
 * classes) read from its four IDX files: {@code train-images-idx3-ubyte.gz},
 * {@code train-labels-idx1-ubyte.gz}, {@code t10k-images-idx3-ubyte.gz},
 * {@code t10k-labels-idx1-ubyte.gz} (uncompressed files without {@code .gz} work too).
 *
 * <pre>{@code
 * Dataset train = FashionMnist.train(FashionMnist.DEFAULT_DIR);  // 60000 samples
 * Dataset test = FashionMnist.test(Path.of("data/fashion-mnist"));
 * }</pre>
 *
 * Samples have two components: the image, shape {@code [rows, cols, 1]} with pixels scaled to
 * {@code [0, 1]} ({@code byte / 255}), and the label one-hot over 10 classes. Images are kept as
 * bytes (47 MB for the training set) and converted per batch. Nothing is downloaded: on Debian
 * the {@code dataset-fashion-mnist} package installs the files in {@link #DEFAULT_DIR}.
 */
public final class FashionMnist {

  private static final Logger LOG = LoggerFactory.getLogger(FashionMnist.class);

  /** Where Debian's {@code dataset-fashion-mnist} package puts the files. */
  public static final Path DEFAULT_DIR = Path.of("/usr/share/datasets/fashion-mnist");

  /** The number of classes. */
  public static final int CLASSES = 10;

  /** The class names, by label. */
  public static final List<String> CLASS_NAMES = List.of("T-shirt/top", "Trouser", "Pullover",
      "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot");

  private FashionMnist() {}

  /**
   * The training split (60,000 samples in the real data).
   *
   * @param dir the directory holding the files
   * @return the dataset
   * @throws IllegalArgumentException when a file is missing or not a valid IDX file
   * @throws IOException              when a file cannot be read
   */
  public static Dataset train(Path dir) throws IOException {
    return load(dir, "train");
  }

  /**
   * The test split (10,000 samples in the real data).
   *
   * @param dir the directory holding the files
   * @return the dataset
   * @throws IllegalArgumentException when a file is missing or not a valid IDX file
   * @throws IOException              when a file cannot be read
   */
  public static Dataset test(Path dir) throws IOException {
    return load(dir, "t10k");
  }

  /**
   * Whether {@code dir} holds the four files (compressed or not); their content is not checked.
   *
   * @param dir the directory
   * @return true when all four files are there
   */
  public static boolean available(Path dir) {
    for (String split : List.of("train", "t10k")) {
      for (String kind : List.of("images-idx3", "labels-idx1")) {
        if (find(dir, split + "-" + kind + "-ubyte") == null) {
          return false;
        }
      }
    }
    return true;
  }

  private static Dataset load(Path dir, String split) throws IOException {
    long t0 = System.nanoTime();
    Path imagesFile = require(dir, split + "-images-idx3-ubyte");
    Path labelsFile = require(dir, split + "-labels-idx1-ubyte");
    Idx.Array images = Idx.read(imagesFile, 3);
    Idx.Array labels = Idx.read(labelsFile, 1);
    if (images.dims()[0] != labels.dims()[0]) {
      throw new IllegalArgumentException(imagesFile + " holds " + images.dims()[0]
          + " images but " + labelsFile + " holds " + labels.dims()[0] + " labels");
    }
    if (images.dims()[1] == 0 || images.dims()[2] == 0) {
      throw new IllegalArgumentException(imagesFile + ": empty images of "
          + images.dims()[1] + " x " + images.dims()[2] + " pixels");
    }
    byte[] l = labels.data();
    for (int i = 0; i < l.length; i++) {
      if ((l[i] & 0xff) >= CLASSES) {
        throw new IllegalArgumentException(labelsFile + ": label " + (l[i] & 0xff)
            + " of sample " + i + " is not a class in [0, " + CLASSES + ")");
      }
    }
    LOG.debug("read {} samples of {} x {} from {} in {} ms", l.length, images.dims()[1],
        images.dims()[2], dir, (System.nanoTime() - t0) / 1_000_000);
    return new Images(split, images.dims()[1], images.dims()[2], images.data(), l);
  }

  private static Path require(Path dir, String base) {
    if (!Files.isDirectory(dir)) {
      throw new IllegalArgumentException("Fashion-MNIST directory " + dir + " does not exist "
          + "(on Debian: apt-get install dataset-fashion-mnist, which fills " + DEFAULT_DIR
          + ")");
    }
    Path p = find(dir, base);
    if (p == null) {
      throw new IllegalArgumentException("Fashion-MNIST file " + dir.resolve(base + ".gz")
          + " not found (nor " + base + " uncompressed); the directory needs "
          + "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
          + "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz");
    }
    return p;
  }

  private static Path find(Path dir, String base) {
    for (String name : List.of(base + ".gz", base)) {
      Path p = dir.resolve(name);
      if (Files.isRegularFile(p)) {
        return p;
      }
    }
    return null;
  }

  /** Images as bytes plus labels; scaled and one-hot encoded when read. */
  private static final class Images implements Dataset {
    private final String split;
    private final int pixels;
    private final byte[] images;
    private final byte[] labels;
    private final List<Shape> shapes;

    Images(String split, int rows, int cols, byte[] images, byte[] labels) {
      this.split = split;
      this.pixels = rows * cols;
      this.images = images;
      this.labels = labels;
      this.shapes = List.of(Shape.of(rows, cols, 1), Shape.of(CLASSES));
    }

    @Override
    public int size() {
      return labels.length;
    }

    @Override
    public List<Shape> sampleShapes() {
      return shapes;
    }

    @Override
    public void read(int component, int sample, float[] dst, int offset) {
      if (sample < 0 || sample >= labels.length) {
        throw new IndexOutOfBoundsException("sample " + sample + " of " + labels.length);
      }
      switch (component) {
        case 0 -> {
          int base = sample * pixels;
          for (int i = 0; i < pixels; i++) {
            dst[offset + i] = (images[base + i] & 0xff) / 255f;
          }
        }
        case 1 -> {
          Arrays.fill(dst, offset, offset + CLASSES, 0f);
          dst[offset + (labels[sample] & 0xff)] = 1f;
        }
        default -> throw new IndexOutOfBoundsException("component " + component + " of 2");
      }
    }

    @Override
    public String toString() {
      return "FashionMnist(" + split + ", " + labels.length + " samples)";
    }
  }
}
