package dev.lms4j.viz;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.VectorGraphicsEncoder;
import org.knowm.xchart.internal.chartpart.Chart;

/**
 * Writes XChart charts as SVG or PNG, chosen by the file's extension, and gives SVG text that can
 * be placed inline in an HTML page. Charts are drawn with {@code java.awt.headless=true}, which
 * this class sets when nothing else did (needs fontconfig and a font, e.g. Debian's
 * {@code fonts-dejavu-core}).
 *
 * <pre>{@code
 * ChartFiles.checkTarget(out);          // bad extension or directory: IllegalArgumentException
 * ChartFiles.write(chart, out);         // out ends in .svg or .png
 * }</pre>
 */
public final class ChartFiles {
  private static final Pattern ID = Pattern.compile("\\bid=\"([^\"]+)\"");
  private static final Pattern DECIMALS = Pattern.compile("(\\d\\.\\d\\d)\\d+");
  private static final Pattern PROLOG = Pattern.compile("(?s)\\A.*?(?=<svg[\\s>])");

  static {
    if (System.getProperty("java.awt.headless") == null) {
      System.setProperty("java.awt.headless", "true");
    }
  }

  private ChartFiles() {}

  /**
   * Makes sure {@code java.awt.headless} is set before AWT starts (a no-op whose call runs this
   * class's static initializer); every class of this package that draws calls it first.
   */
  static void headless() {}

  /** Image formats a chart can be written in. */
  public enum Format {
    /** Scalable vector graphics (text stays text). */
    SVG,
    /** A bitmap. */
    PNG;

    /**
     * The format named by a file's extension ({@code .svg} or {@code .png}, any case).
     *
     * @throws IllegalArgumentException for any other extension
     */
    public static Format of(Path file) {
      String name = file.getFileName() == null ? "" : file.getFileName().toString()
          .toLowerCase(Locale.ROOT);
      if (name.endsWith(".svg")) {
        return SVG;
      }
      if (name.endsWith(".png")) {
        return PNG;
      }
      throw new IllegalArgumentException("cannot plot to " + file + ": the file name must end "
          + "in .svg or .png");
    }
  }

  /**
   * Checks, before any work is done, that a chart can be written to {@code file}: a known
   * extension, an existing parent directory, and not a directory itself.
   *
   * @throws IllegalArgumentException with a message naming the problem
   */
  public static Format checkTarget(Path file) {
    Format f = Format.of(file);
    checkWritable(file);
    return f;
  }

  /**
   * Checks that {@code file}'s directory exists and that {@code file} is not a directory.
   *
   * @throws IllegalArgumentException with a message naming the problem
   */
  public static void checkWritable(Path file) {
    Path dir = file.toAbsolutePath().getParent();
    if (dir == null || !Files.isDirectory(dir)) {
      throw new IllegalArgumentException("cannot write " + file + ": no such directory " + dir);
    }
    if (Files.isDirectory(file)) {
      throw new IllegalArgumentException("cannot write " + file + ": it is a directory");
    }
  }

  /**
   * Writes a chart to {@code file} in the format its extension names, atomically (a temporary
   * file next to it, then a rename), so a failure leaves no partial file.
   */
  public static void write(Chart<?, ?> chart, Path file) throws IOException {
    Format f = checkTarget(file);
    byte[] bytes = f == Format.SVG ? svg(chart).getBytes(StandardCharsets.UTF_8) : png(chart);
    writeAtomically(file, bytes);
  }

  /** The chart as a PNG image. */
  public static byte[] png(Chart<?, ?> chart) throws IOException {
    return BitmapEncoder.getBitmapBytes(chart, BitmapEncoder.BitmapFormat.PNG);
  }

  /**
   * The chart as a standalone SVG document. XChart draws text as glyph outlines, so the file
   * does not depend on the viewer's fonts; coordinates are cut to two decimals (a hundredth of
   * a pixel), which roughly halves the file.
   */
  public static String svg(Chart<?, ?> chart) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    VectorGraphicsEncoder.saveVectorGraphic(chart, (OutputStream) out,
        VectorGraphicsEncoder.VectorGraphicsFormat.SVG);
    return DECIMALS.matcher(out.toString(StandardCharsets.UTF_8)).replaceAll("$1");
  }

  /**
   * The chart as an {@code <svg>} element for an HTML page: without the XML prolog, scaled to
   * the page's width, and with every element id prefixed by {@code idPrefix} so that several
   * charts on one page do not share clip-path ids.
   */
  public static String inlineSvg(Chart<?, ?> chart, String idPrefix) throws IOException {
    return inline(svg(chart), idPrefix);
  }

  /** {@link #inlineSvg} on SVG text. */
  static String inline(String svg, String idPrefix) {
    String s = PROLOG.matcher(svg).replaceFirst("");
    Matcher m = ID.matcher(s);
    java.util.Set<String> ids = new java.util.LinkedHashSet<>();
    while (m.find()) {
      ids.add(m.group(1));
    }
    for (String id : ids) {
      String q = Pattern.quote(id);
      s = s.replaceAll("\\bid=\"" + q + "\"", Matcher.quoteReplacement("id=\"" + idPrefix + id
          + "\""));
      s = s.replaceAll("#" + q + "(?=[\")'])", Matcher.quoteReplacement("#" + idPrefix + id));
    }
    // keep the drawing's proportions and let the page decide the width
    return s.replaceFirst("<svg", "<svg class=\"chart\" preserveAspectRatio=\"xMidYMid meet\"");
  }

  static void writeAtomically(Path file, byte[] bytes) throws IOException {
    Path abs = file.toAbsolutePath();
    Path tmp = abs.resolveSibling(abs.getFileName() + ".tmp");
    try {
      Files.write(tmp, bytes);
      Files.move(tmp, abs, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }
}
