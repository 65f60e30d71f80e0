package dev.lms4j.train.models;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeSet;

/** Validated option values for one build: the defaults overlaid with the caller's overrides. */
final class Options {

  private final String model;
  private final Map<String, String> values;

  private Options(String model, Map<String, String> values) {
    this.model = model;
    this.values = values;
  }

  /**
   * Merges {@code overrides} into {@code defaults}.
   *
   * @throws IllegalArgumentException for a key that is not among the defaults
   */
  static Options parse(String model, Map<String, String> defaults, Map<String, String> overrides) {
    Map<String, String> merged = new LinkedHashMap<>(defaults);
    if (overrides != null) {
      for (Map.Entry<String, String> e : overrides.entrySet()) {
        if (!defaults.containsKey(e.getKey())) {
          throw new IllegalArgumentException(model + ": unknown option '" + e.getKey()
              + "' (known options: " + String.join(", ", new TreeSet<>(defaults.keySet())) + ")");
        }
        if (e.getValue() == null) {
          throw new IllegalArgumentException(model + ": option '" + e.getKey() + "' has no value");
        }
        merged.put(e.getKey(), e.getValue().trim());
      }
    }
    return new Options(model, merged);
  }

  /** Checks the batch size shared by all models. */
  static void checkBatch(String model, int batch) {
    if (batch < 1) {
      throw new IllegalArgumentException(model + ": batch must be >= 1, got " + batch);
    }
  }

  /** Whether the model has option {@code key}. */
  boolean has(String key) {
    return values.containsKey(key);
  }

  /** An integer option in {@code [min, max]}. */
  int intValue(String key, int min, int max) {
    String v = values.get(key);
    int n;
    try {
      n = Integer.parseInt(v);
    } catch (NumberFormatException e) {
      throw bad(key, v, "an integer in [" + min + ", " + max + "]");
    }
    if (n < min || n > max) {
      throw bad(key, v, "an integer in [" + min + ", " + max + "]");
    }
    return n;
  }

  /** A text option that must be one of {@code allowed}. */
  String choice(String key, String... allowed) {
    String v = values.get(key);
    for (String a : allowed) {
      if (a.equals(v)) {
        return v;
      }
    }
    throw bad(key, v, "one of " + String.join(", ", allowed));
  }

  /** Any long option. */
  long longValue(String key) {
    String v = values.get(key);
    try {
      return Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw bad(key, v, "an integer");
    }
  }

  /** A finite float option strictly greater than zero. */
  float positiveFloat(String key) {
    String v = values.get(key);
    float f;
    try {
      f = Float.parseFloat(v);
    } catch (NumberFormatException e) {
      throw bad(key, v, "a positive number");
    }
    if (!(f > 0) || Float.isInfinite(f)) {
      throw bad(key, v, "a positive number");
    }
    return f;
  }

  /** A finite float option in {@code [min, max)}. */
  float floatInRange(String key, float min, float max) {
    String v = values.get(key);
    float f;
    try {
      f = Float.parseFloat(v);
    } catch (NumberFormatException e) {
      throw bad(key, v, "a number in [" + min + ", " + max + ")");
    }
    if (!(f >= min && f < max)) {
      throw bad(key, v, "a number in [" + min + ", " + max + ")");
    }
    return f;
  }

  private IllegalArgumentException bad(String key, String value, String expected) {
    return new IllegalArgumentException(model + ": option '" + key + "' must be " + expected
        + ", got '" + value + "'");
  }
}
