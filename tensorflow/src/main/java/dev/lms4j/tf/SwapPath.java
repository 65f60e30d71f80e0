package dev.lms4j.tf;

import java.util.Locale;

/**
 * Which mechanism moves swapped tensors (host and disk tiers).
 *
 * <pre>{@code
 * Lms lms = Lms.builder().budget(256L << 20).swapPath(SwapPath.NATIVE).build();
 * }</pre>
 */
public enum SwapPath {
  /** The native swap ops of {@link NativeSwap} (one copy each way); an error if unavailable. */
  NATIVE,
  /** Standard TensorFlow ops: SerializeTensor / ParseTensor, WriteFile / ReadFile. */
  STANDARD,
  /** Native when the library loads in this JVM, else standard (logged once). The default. */
  AUTO;

  /** Parses {@code native}, {@code standard} or {@code auto} (case-insensitive). */
  public static SwapPath parse(String s) {
    return switch (s.toLowerCase(Locale.ROOT)) {
      case "native" -> NATIVE;
      case "standard" -> STANDARD;
      case "auto" -> AUTO;
      default -> throw new IllegalArgumentException(
          "unknown swap path '" + s + "' (expected native, standard or auto)");
    };
  }

  /**
   * The mechanism this path stands for in this JVM.
   *
   * @param overlap native swap-outs copy on the library's copy thread (ignored for standard)
   * @throws IllegalStateException for {@link #NATIVE} when the library cannot be loaded
   */
  public SwapRewriter.Mechanism resolve(boolean overlap) {
    boolean nat = switch (this) {
      case STANDARD -> false;
      case AUTO -> NativeSwap.load();
      case NATIVE -> {
        if (!NativeSwap.load()) {
          throw new IllegalStateException("swap path native: the native swap library cannot be "
              + "loaded (" + NativeSwap.status() + ")");
        }
        yield true;
      }
    };
    if (!nat) {
      return SwapRewriter.Mechanism.STANDARD;
    }
    return overlap ? SwapRewriter.Mechanism.NATIVE_ASYNC : SwapRewriter.Mechanism.NATIVE;
  }
}
