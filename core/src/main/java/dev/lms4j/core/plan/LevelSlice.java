package dev.lms4j.core.plan;

/**
 * A slice of topological levels as TFLMS writes them: {@code "3"} (one level), {@code "3:5"}
 * (levels 3 and 4, end exclusive), {@code "3:"} (3 to the last), {@code ":5"} (0 to 4).
 *
 * @param from first level, inclusive
 * @param to   last level, exclusive; {@link Integer#MAX_VALUE} for an open end
 */
record LevelSlice(int from, int to) {

  /** Parses a slice; throws {@link IllegalArgumentException} with the reason. */
  public static LevelSlice parse(String s) {
    String t = s.trim();
    try {
      int colon = t.indexOf(':');
      if (colon < 0) {
        int l = Integer.parseInt(t);
        return checked(s, l, l + 1);
      }
      String a = t.substring(0, colon).trim();
      String b = t.substring(colon + 1).trim();
      int from = a.isEmpty() ? 0 : Integer.parseInt(a);
      int to = b.isEmpty() ? Integer.MAX_VALUE : Integer.parseInt(b);
      return checked(s, from, to);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("bad serialization slice '" + s
          + "' (expected N, N:M, N: or :M with level numbers)");
    }
  }

  private static LevelSlice checked(String s, int from, int to) {
    if (from < 0 || to <= from) {
      throw new IllegalArgumentException("bad serialization slice '" + s + "': empty or negative");
    }
    return new LevelSlice(from, to);
  }

  /** True when level {@code l} lies in the slice. */
  public boolean contains(int l) {
    return l >= from && l < to;
  }
}
