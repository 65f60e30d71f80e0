package dev.lms4j.core.memory;

import java.util.Locale;

/** Where a swapped tensor lives between its swap-out and its swap-in. */
public enum Tier {
  /** Host memory, outside the device budget ({@code SerializeTensor} / {@code ParseTensor}). */
  HOST,
  /** Files in a directory ({@code WriteFile} / {@code ReadFile}); lowers resident memory too. */
  DISK,
  /**
   * TFLMS's way on GPU builds: {@code Identity} placed on {@code /device:CPU:0} and back on the
   * consumer's device, TensorFlow inserts the copies. Only structurally tested (no GPU here).
   */
  DEVICE_PLACEMENT;

  /** Parses {@code host}, {@code disk} or {@code device-placement} (case-insensitive). */
  public static Tier parse(String s) {
    return switch (s.toLowerCase(Locale.ROOT).replace('_', '-')) {
      case "host" -> HOST;
      case "disk" -> DISK;
      case "device-placement", "device" -> DEVICE_PLACEMENT;
      default -> throw new IllegalArgumentException(
          "unknown swap tier '" + s + "' (expected host, disk or device-placement)");
    };
  }

  /** The CLI spelling. */
  public String cliName() {
    return name().toLowerCase(Locale.ROOT).replace('_', '-');
  }
}
