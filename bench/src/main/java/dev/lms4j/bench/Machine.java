package dev.lms4j.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** A one-line description of this machine for benchmark results. */
final class Machine {
  private Machine() {}

  static String describe() {
    String cpu = "unknown CPU";
    try {
      for (String l : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
        if (l.startsWith("model name")) {
          cpu = l.substring(l.indexOf(':') + 1).trim();
          break;
        }
      }
    } catch (IOException e) {
      // keep the default
    }
    long memGib = Runtime.getRuntime().maxMemory() >> 30;
    return Runtime.getRuntime().availableProcessors() + " cores, " + cpu + ", "
        + System.getProperty("os.name") + " " + System.getProperty("os.arch") + ", JDK "
        + System.getProperty("java.version") + ", TensorFlow Java 1.1.0 (CPU, BFC budget); "
        + "JVM max heap " + memGib + " GiB";
  }
}
