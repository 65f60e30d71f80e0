package dev.lms4j.checkpoint;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.Collections;
import java.util.Iterator;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * A backend's parameter string, parsed: either {@code key=value,key=value} (whitespace around
 * keys and values is trimmed) or a JSON object of scalars ({@code {"dir":"/a,b","keep":3}}, for
 * values that contain commas). Unknown keys, duplicate keys and malformed values are refused
 * with an {@link IllegalArgumentException} naming the backend, the key and what was expected.
 *
 * <pre>{@code
 * BackendParams p = BackendParams.parse("files", "dir=/tmp/ckpt,keep=3", Set.of("dir", "keep"));
 * Path dir = p.path("dir");                 // required
 * int keep = p.intValue("keep", 5, 0);      // default 5, at least 0
 * }</pre>
 */
public final class BackendParams {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final String backend;
  private final Map<String, String> values;

  private BackendParams(String backend, Map<String, String> values) {
    this.backend = backend;
    this.values = Collections.unmodifiableMap(values);
  }

  /**
   * Parses {@code params} for the backend named {@code backend}, accepting only {@code keys}.
   *
   * @param params the parameter string; null or blank means no parameters
   * @throws IllegalArgumentException for malformed input or unknown keys
   */
  public static BackendParams parse(String backend, String params, Set<String> keys) {
    Map<String, String> values = new TreeMap<>();
    String s = params == null ? "" : params.trim();
    if (s.startsWith("{")) {
      JsonNode root;
      try {
        root = JSON.readTree(s);
      } catch (JsonProcessingException e) {
        throw new IllegalArgumentException("backend '" + backend + "': parameters are not valid "
            + "JSON: " + e.getOriginalMessage());
      }
      if (!root.isObject()) {
        throw new IllegalArgumentException("backend '" + backend
            + "': JSON parameters must be an object");
      }
      for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        if (!e.getValue().isValueNode()) {
          throw new IllegalArgumentException("backend '" + backend + "': parameter '"
              + e.getKey() + "' must be a string, number or boolean");
        }
        values.put(e.getKey(), e.getValue().asText());
      }
    } else if (!s.isEmpty()) {
      for (String part : s.split(",")) {
        if (part.isBlank()) {
          continue;
        }
        int eq = part.indexOf('=');
        if (eq <= 0) {
          throw new IllegalArgumentException("backend '" + backend + "': expected key=value, got '"
              + part.trim() + "' in '" + params + "'");
        }
        String k = part.substring(0, eq).trim();
        if (values.put(k, part.substring(eq + 1).trim()) != null) {
          throw new IllegalArgumentException("backend '" + backend + "': parameter '" + k
              + "' given twice");
        }
      }
    }
    for (String k : values.keySet()) {
      if (!keys.contains(k)) {
        throw new IllegalArgumentException("backend '" + backend + "': unknown parameter '" + k
            + "' (known: " + String.join(", ", new TreeSet<>(keys)) + ")");
      }
    }
    return new BackendParams(backend, values);
  }

  /** The raw value of {@code key}, or null when absent. */
  public String get(String key) {
    return values.get(key);
  }

  /** The parsed keys and values, sorted by key. */
  public Map<String, String> asMap() {
    return values;
  }

  /** The value of {@code key}, or {@code defaultValue} when absent. */
  public String string(String key, String defaultValue) {
    return values.getOrDefault(key, defaultValue);
  }

  /**
   * The path under {@code key}, which is required.
   *
   * @throws IllegalArgumentException when absent or empty
   */
  public Path path(String key) {
    String v = values.get(key);
    if (v == null || v.isEmpty()) {
      throw new IllegalArgumentException("backend '" + backend + "': parameter '" + key
          + "' is required (e.g. " + key + "=/path/to/checkpoints)");
    }
    return Path.of(v);
  }

  /**
   * The integer under {@code key}, {@code defaultValue} when absent.
   *
   * @throws IllegalArgumentException when it is not an integer or is below {@code min}
   */
  public int intValue(String key, int defaultValue, int min) {
    long v = longValue(key, defaultValue, min);
    if (v > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("backend '" + backend + "': parameter '" + key
          + "' is too large: " + v);
    }
    return (int) v;
  }

  /**
   * The long under {@code key}, {@code defaultValue} when absent.
   *
   * @throws IllegalArgumentException when it is not an integer or is below {@code min}
   */
  public long longValue(String key, long defaultValue, long min) {
    String v = values.get(key);
    if (v == null) {
      return defaultValue;
    }
    long n;
    try {
      n = Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("backend '" + backend + "': parameter '" + key
          + "' must be an integer, got '" + v + "'");
    }
    if (n < min) {
      throw new IllegalArgumentException("backend '" + backend + "': parameter '" + key
          + "' must be >= " + min + ", got " + n);
    }
    return n;
  }

  /**
   * The boolean under {@code key} ({@code true/false/yes/no/1/0}), {@code defaultValue} when
   * absent.
   *
   * @throws IllegalArgumentException for any other value
   */
  public boolean bool(String key, boolean defaultValue) {
    String v = values.get(key);
    if (v == null) {
      return defaultValue;
    }
    switch (v.toLowerCase(Locale.ROOT)) {
      case "true", "yes", "1" -> {
        return true;
      }
      case "false", "no", "0" -> {
        return false;
      }
      default -> throw new IllegalArgumentException("backend '" + backend + "': parameter '" + key
          + "' must be true or false, got '" + v + "'");
    }
  }

  @Override
  public String toString() {
    return backend + values;
  }
}
