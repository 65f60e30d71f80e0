package dev.lms4j.core.report;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Parses and prints byte sizes: {@code 512MiB}, {@code 2GiB}, {@code 1.5GB}, plain bytes. */
public final class Sizes {
  private static final Pattern SIZE =
      Pattern.compile("\\s*([0-9]+(?:\\.[0-9]+)?)\\s*([kmgt]?i?b?)\\s*", Pattern.CASE_INSENSITIVE);

  private Sizes() {}

  /**
   * Parses a size. Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones (KB, MB,
   * GB, TB) powers of 1000; a bare number is bytes.
   *
   * @throws IllegalArgumentException with the accepted forms when it cannot parse
   */
  public static long parse(String s) {
    Matcher m = SIZE.matcher(s == null ? "" : s);
    if (!m.matches()) {
      throw new IllegalArgumentException("cannot parse size '" + s
          + "' (examples: 512MiB, 2GiB, 1.5GB, 1048576)");
    }
    double v = Double.parseDouble(m.group(1));
    String unit = m.group(2).toLowerCase(Locale.ROOT);
    double mult = switch (unit) {
      case "", "b" -> 1;
      case "k", "kib", "ki" -> 1L << 10;
      case "m", "mib", "mi" -> 1L << 20;
      case "g", "gib", "gi" -> 1L << 30;
      case "t", "tib", "ti" -> 1L << 40;
      case "kb" -> 1e3;
      case "mb" -> 1e6;
      case "gb" -> 1e9;
      case "tb" -> 1e12;
      default -> throw new IllegalArgumentException("unknown size unit in '" + s
          + "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
    };
    double bytes = v * mult;
    if (bytes < 1 || bytes > 1e18) {
      throw new IllegalArgumentException("size '" + s + "' is out of range");
    }
    return (long) bytes;
  }

  /**
   * An allocation's size: in MiB with one decimal, or in KiB under a tenth of a MiB (a failed
   * allocation of 12,544 bytes is {@code 12.3 KiB}, not {@code 0.0 MiB}).
   */
  public static String allocation(long bytes) {
    if (bytes > 0 && bytes < (1 << 20) / 10) {
      return String.format(Locale.ROOT, "%.1f KiB", bytes / 1024.0);
    }
    return mib(bytes);
  }

  /** A size in MiB with one decimal, e.g. {@code 512.0 MiB}. */
  public static String mib(long bytes) {
    return String.format(Locale.ROOT, "%.1f MiB", bytes / 1048576.0);
  }
}
