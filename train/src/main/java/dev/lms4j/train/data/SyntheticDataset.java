package dev.lms4j.train.data;

import dev.lms4j.tf.Manifest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.SplittableRandom;
import org.tensorflow.ndarray.Shape;

/**
 * Seeded synthetic samples of any shape, computed on demand (nothing is stored): the same seed
 * gives the same values, whatever the order samples are read in.
 *
 * <pre>{@code
 * Dataset d = SyntheticDataset.of(1000, 42, Shape.of(784), 10);    // features + one-hot labels
 * Dataset f = SyntheticDataset.forManifest(trainingGraph.manifest(), 512, 7);
 * }</pre>
 *
 * Each component has a fill, as in a manifest feed: {@code normal} (standard normal),
 * {@code uniform} ({@code [0, 1)}), {@code zeros}, or {@code onehot} along the last axis. A
 * one-hot component is a <em>learnable</em> label when the dataset has a non-one-hot component:
 * its class is the argmax of a fixed, seeded linear function of the first such component, so a
 * model can fit it (a linear model perfectly); without one the class is random. The rule depends
 * on the seed, so take a training and a test split of one task as {@link #slice}s of one dataset.
 */
public final class SyntheticDataset implements Dataset {

  private final int size;
  private final long seed;
  private final List<Shape> shapes;
  private final List<String> fills;
  private final int source;
  private final float[][] projections;

  private SyntheticDataset(int size, long seed, List<Shape> shapes, List<String> fills) {
    if (size < 0) {
      throw new IllegalArgumentException("dataset size must be >= 0, got " + size);
    }
    if (shapes.isEmpty()) {
      throw new IllegalArgumentException("a dataset needs at least one component");
    }
    this.size = size;
    this.seed = seed;
    this.shapes = List.copyOf(shapes);
    this.fills = List.copyOf(fills);
    int src = -1;
    for (int c = 0; c < shapes.size(); c++) {
      String fill = fills.get(c);
      if (!Manifest.FILLS.contains(fill)) {
        throw new IllegalArgumentException("component " + c + ": unknown fill '" + fill
            + "' (expected one of " + Manifest.FILLS.stream().sorted().toList() + ")");
      }
      Shape s = shapes.get(c);
      if (s.hasUnknownDimension()) {
        throw new IllegalArgumentException("component " + c + ": shape " + s
            + " has an unknown dimension");
      }
      if (s.size() > Integer.MAX_VALUE / 2) {
        throw new IllegalArgumentException("component " + c + ": shape " + s + " is too large");
      }
      if (fill.equals("onehot") && lastDim(s) < 1) {
        throw new IllegalArgumentException("component " + c + ": a one-hot shape needs a last "
            + "dimension >= 1, got " + s);
      }
      if (src < 0 && !fill.equals("onehot") && !fill.equals("zeros")) {
        src = c;
      }
    }
    this.source = src;
    this.projections = new float[shapes.size()][];
    if (src >= 0) {
      int features = (int) shapes.get(src).size();
      for (int c = 0; c < shapes.size(); c++) {
        if (fills.get(c).equals("onehot")) {
          int classes = (int) lastDim(shapes.get(c));
          float[] w = new float[classes * features];
          SplittableRandom r = new SplittableRandom(mix(seed, -1, c));
          for (int i = 0; i < w.length; i++) {
            w[i] = (float) gaussian(r);
          }
          projections[c] = w;
        }
      }
    }
  }

  /**
   * Supervised data: normal features of {@code featureShape} and one-hot labels over
   * {@code classes} that depend linearly on the features.
   *
   * @param size         number of samples
   * @param seed         the seed
   * @param featureShape shape of one sample's features, e.g. {@code [28, 28, 1]}
   * @param classes      number of classes, at least 2
   * @return the dataset
   * @throws IllegalArgumentException for a negative size or fewer than 2 classes
   */
  public static SyntheticDataset of(int size, long seed, Shape featureShape, int classes) {
    Objects.requireNonNull(featureShape, "featureShape");
    if (classes < 2) {
      throw new IllegalArgumentException("classes must be >= 2, got " + classes);
    }
    return new SyntheticDataset(size, seed, List.of(featureShape, Shape.of(classes)),
        List.of("normal", "onehot"));
  }

  /**
   * One component per feed of a manifest, with the feed's shape (without the batch dimension)
   * and fill.
   *
   * @param manifest the manifest; its feeds must be float32 with a batch dimension
   * @param size     number of samples
   * @param seed     the seed
   * @return the dataset
   * @throws IllegalArgumentException for a feed that is not float32 or has rank 0
   */
  public static SyntheticDataset forManifest(Manifest manifest, int size, long seed) {
    List<Shape> shapes = new ArrayList<>();
    List<String> fills = new ArrayList<>();
    for (Manifest.Feed f : manifest.feeds()) {
      if (!f.dtype().equals("float32") || f.shape().length == 0) {
        throw new IllegalArgumentException("feed '" + f.name() + "': synthetic datasets make "
            + "float32 feeds with a batch dimension, got " + f.dtype() + " "
            + Arrays.toString(f.shape()));
      }
      long[] s = f.shape();
      shapes.add(Shape.of(Arrays.copyOfRange(s, 1, s.length)));
      fills.add(f.fill());
    }
    return new SyntheticDataset(size, seed, shapes, fills);
  }

  @Override
  public int size() {
    return size;
  }

  @Override
  public List<Shape> sampleShapes() {
    return shapes;
  }

  @Override
  public void read(int component, int sample, float[] dst, int offset) {
    if (sample < 0 || sample >= size) {
      throw new IndexOutOfBoundsException("sample " + sample + " of " + size);
    }
    if (component < 0 || component >= shapes.size()) {
      throw new IndexOutOfBoundsException("component " + component + " of " + shapes.size());
    }
    int n = (int) shapes.get(component).size();
    switch (fills.get(component)) {
      case "normal", "uniform" -> generate(component, sample, dst, offset);
      case "zeros" -> Arrays.fill(dst, offset, offset + n, 0f);
      case "onehot" -> oneHot(component, sample, dst, offset, n);
      default -> throw new IllegalStateException(fills.get(component));
    }
  }

  private void generate(int component, int sample, float[] dst, int offset) {
    int n = (int) shapes.get(component).size();
    SplittableRandom r = new SplittableRandom(mix(seed, sample, component));
    boolean normal = fills.get(component).equals("normal");
    for (int i = 0; i < n; i++) {
      dst[offset + i] = normal ? (float) gaussian(r) : (float) r.nextDouble();
    }
  }

  private void oneHot(int component, int sample, float[] dst, int offset, int n) {
    int classes = (int) lastDim(shapes.get(component));
    Arrays.fill(dst, offset, offset + n, 0f);
    int rows = n / classes;
    if (projections[component] == null) {
      SplittableRandom r = new SplittableRandom(mix(seed, sample, component));
      for (int row = 0; row < rows; row++) {
        dst[offset + row * classes + r.nextInt(classes)] = 1f;
      }
      return;
    }
    int features = (int) shapes.get(source).size();
    float[] x = new float[features];
    generate(source, sample, x, 0);
    float[] w = projections[component];
    // every row of a multi-row one-hot gets the same class: labels depend on the sample only
    int best = 0;
    double bestScore = Double.NEGATIVE_INFINITY;
    for (int k = 0; k < classes; k++) {
      double s = 0;
      for (int i = 0; i < features; i++) {
        s += w[k * features + i] * x[i];
      }
      if (s > bestScore) {
        bestScore = s;
        best = k;
      }
    }
    for (int row = 0; row < rows; row++) {
      dst[offset + row * classes + best] = 1f;
    }
  }

  private static long lastDim(Shape s) {
    return s.numDimensions() == 0 ? 1 : s.get(s.numDimensions() - 1);
  }

  private static long mix(long seed, long sample, int component) {
    long h = seed * 0x9E3779B97F4A7C15L + sample * 0xC2B2AE3D27D4EB4FL + component * 0x165667B1L;
    h ^= h >>> 31;
    return h * 0x94D049BB133111EBL;
  }

  private static double gaussian(SplittableRandom r) {
    double u1 = 1.0 - r.nextDouble();
    double u2 = r.nextDouble();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  @Override
  public String toString() {
    return "SyntheticDataset(" + size + " samples, " + shapes + ", " + fills + ", seed " + seed
        + ")";
  }
}
