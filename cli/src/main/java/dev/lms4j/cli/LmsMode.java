package dev.lms4j.cli;

import java.util.Locale;

/** The {@code --lms} choices. */
enum LmsMode {
  OFF, TFLMS, SWAP, REMAT, AUTO, SQRT;

  static LmsMode parse(String s) {
    try {
      return valueOf(s.toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("unknown --lms mode '" + s
          + "' (expected off, tflms, swap, remat, auto or sqrt)");
    }
  }

  String cli() {
    return name().toLowerCase(Locale.ROOT);
  }
}
