package dev.lms4j.tf.run;

import dev.lms4j.core.memory.BfcReplay;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What TensorFlow's budgeted allocator did in a run, request by request, as its own log shows
 * it, and whether lms4j's allocator model ({@link BfcReplay.Allocator}) does the same with
 * those requests. A worker started with {@link #ENV} set logs every request of the BFC allocator
 * with the address it returned ({@code TF_CPP_VMODULE=bfc_allocator=4}) and the op each kernel
 * runs for ({@code executor=1}); {@link Reader} reads those lines as they come, keeping per
 * request its size, the region (in the order the allocator grew them) and offset it landed at,
 * and the op; per release which request it frees; the request refused at an out-of-memory error.
 *
 * <p>Replayed through the model ({@link #check}), the first request placed elsewhere says where
 * the allocator model is wrong; where every chunk lands where TensorFlow put it, what remains of
 * a misprediction is the request sequence, which {@link #write} lets one compare with the
 * model's, op by op. (Measured: the model with the regions stacked the other way up placed 18 of
 * the corpus U-Net plan's 647 requests elsewhere; with them as TensorFlow grows them, none.)
 *
 * <pre>{@code
 * LMS4J_BFC_LOG=u14.log ./lms4j run --graph u.pb --manifest u.json --budget 14MiB --lms off
 * }</pre>
 */
public final class AllocatorLog {
  /** Environment variable naming the file a budgeted worker's allocator log is written to. */
  public static final String ENV = "LMS4J_BFC_LOG";
  /** The allocator a budget limits (TensorFlow's CPU BFC allocator). */
  static final String ALLOCATOR = "bfc_cpu_allocator_for_gpu";
  /** The environment that makes TensorFlow log what this class reads. */
  static final Map<String, String> TF_ENV = Map.of("TF_CPP_VMODULE",
      "bfc_allocator=4,executor=1", "TF_CPP_MIN_LOG_LEVEL", "0");

  private static final Pattern NODE = Pattern.compile("Process node: \\d+ step -?\\d+ \\{\\{node "
      + "([^}]+)\\}\\}");
  private static final Pattern REQUEST = Pattern.compile("\\[mem-debug\\] (AllocateRaw|"
      + "DeallocateRaw)," + ALLOCATOR + ",(\\d+),(0x[0-9a-f]+)");
  private static final Pattern EXTEND = Pattern.compile("Extending allocation by .* for "
      + ALLOCATOR + "\\.");
  private static final Pattern REGION = Pattern.compile("Allocated memory at (0x[0-9a-f]+) to "
      + "(0x[0-9a-f]+)");
  private static final Pattern REFUSED = Pattern.compile("ran out of memory trying to allocate "
      + ".*\\(rounded to (\\d+)\\)\\s*requested by op (\\S+)");

  /** One event of the log. */
  public sealed interface Event permits Alloc, Free, Refused {}

  /**
   * A request TensorFlow granted.
   *
   * @param bytes  the bytes asked for
   * @param region the region's index, in the order the allocator grew them
   * @param offset the chunk's offset in its region
   * @param op     the op whose kernel ran when it was made ({@code ?} where unknown)
   */
  public record Alloc(long bytes, int region, long offset, String op) implements Event {}

  /** The {@code index}-th granted request (from 0) freed. */
  public record Free(int index) implements Event {}

  /** A request TensorFlow refused: out of memory. */
  public record Refused(long bytes, String op) implements Event {}

  /**
   * What the model did with the log's requests.
   *
   * @param requests  the granted requests replayed
   * @param firstDiff the index of the first request the model placed elsewhere (or refused), -1
   *                  when none
   * @param detail    one line: the agreement, or the first difference
   */
  public record Check(int requests, int firstDiff, String detail) {
    /** True when the model put every chunk where TensorFlow did. */
    public boolean same() {
      return firstDiff < 0;
    }
  }

  private final List<Long> regions;
  private final List<Event> events;

  AllocatorLog(List<Long> regions, List<Event> events) {
    this.regions = List.copyOf(regions);
    this.events = List.copyOf(events);
  }

  /** The regions' sizes, in the order the allocator grew them. */
  public List<Long> regions() {
    return regions;
  }

  /** The events, in order. */
  public List<Event> events() {
    return events;
  }

  /** Reads a run's log lines as they come; {@link #log} once they are all read. */
  public static final class Reader {
    private final List<long[]> regionBounds = new ArrayList<>(); // {start, end}
    private final List<Event> events = new ArrayList<>();
    private final Map<Long, Integer> live = new HashMap<>();
    private boolean extending;
    private boolean refused;
    private String op = "?";
    private int granted;

    /** Takes one line of the worker's standard error. */
    public void accept(String line) {
      if (refused) {
        return; // what follows the refusal is the dump and the session's teardown
      }
      if (line.contains("Process node")) {
        Matcher m = NODE.matcher(line);
        if (m.find()) {
          op = m.group(1);
        }
        return;
      }
      if (line.contains("[mem-debug]")) {
        Matcher m = REQUEST.matcher(line);
        if (m.find()) {
          long bytes = Long.parseLong(m.group(2));
          long addr = Long.parseUnsignedLong(m.group(3).substring(2), 16);
          if (m.group(1).startsWith("Allocate")) {
            int r = regionOf(addr);
            events.add(new Alloc(bytes, r, r < 0 ? -1 : addr - regionBounds.get(r)[0], op));
            live.put(addr, granted++);
          } else {
            Integer i = live.remove(addr);
            if (i != null) {
              events.add(new Free(i));
            }
          }
        }
        return;
      }
      if (EXTEND.matcher(line).find()) {
        extending = true; // the region's bounds follow on the next line about a region
        return;
      }
      Matcher m = REGION.matcher(line);
      if (m.find()) {
        if (extending) {
          regionBounds.add(new long[] {Long.parseUnsignedLong(m.group(1).substring(2), 16),
              Long.parseUnsignedLong(m.group(2).substring(2), 16)});
          extending = false;
        }
        return;
      }
      m = REFUSED.matcher(line);
      if (line.contains(ALLOCATOR) && m.find()) {
        events.add(new Refused(Long.parseLong(m.group(1)), m.group(2)));
        refused = true;
      }
    }

    private int regionOf(long addr) {
      for (int i = 0; i < regionBounds.size(); i++) {
        if (addr >= regionBounds.get(i)[0] && addr < regionBounds.get(i)[1]) {
          return i;
        }
      }
      return -1;
    }

    /** The log read so far. */
    public AllocatorLog log() {
      List<Long> sizes = new ArrayList<>();
      for (long[] b : regionBounds) {
        sizes.add(b[1] - b[0]);
      }
      return new AllocatorLog(sizes, events);
    }
  }

  /** The log of these lines of a worker's standard error. */
  public static AllocatorLog parse(Iterable<String> lines) {
    Reader r = new Reader();
    for (String line : lines) {
      r.accept(line);
    }
    return r.log();
  }

  /**
   * Replays the granted requests through the allocator model under {@code limitBytes}: the first
   * one it places in another region or at another offset, or refuses; whether it refuses what
   * TensorFlow refused; then whether it grew the regions TensorFlow grew.
   */
  public Check check(long limitBytes) {
    BfcReplay.Allocator bfc = new BfcReplay.Allocator(limitBytes);
    List<Long> addresses = new ArrayList<>();
    int n = 0;
    String refused = "";
    for (Event e : events) {
      if (e instanceof Alloc a) {
        long at = bfc.allocate(a.bytes());
        if (at < 0) {
          return new Check(n, n, String.format("request %d (%d bytes, %s): TensorFlow granted it "
              + "(region %d, offset %d), the model ran out of memory", n, a.bytes(), a.op(),
              a.region(), a.offset()));
        }
        long[] p = bfc.place(at);
        if (p[0] != a.region() || p[1] != a.offset()) {
          return new Check(n, n, String.format("request %d (%d bytes, %s): TensorFlow put it in "
              + "region %d at offset %d, the model in region %d at offset %d", n, a.bytes(),
              a.op(), a.region(), a.offset(), p[0], p[1]));
        }
        addresses.add(at);
        n++;
      } else if (e instanceof Free f) {
        bfc.free(addresses.get(f.index()));
      } else if (e instanceof Refused r) {
        if (bfc.allocate(r.bytes()) >= 0) {
          return new Check(n, n, String.format("request %d (%d bytes, %s): TensorFlow refused "
              + "it, the model granted it", n, r.bytes(), r.op()));
        }
        refused = String.format(" and refused the %d bytes %s asked for, as TensorFlow did",
            r.bytes(), r.op());
      }
    }
    if (!bfc.regionSizes().equals(regions)) {
      return new Check(n, n, "the model grew regions " + bfc.regionSizes() + ", TensorFlow "
          + regions);
    }
    return new Check(n, -1, String.format("the model put all %d requests where TensorFlow did, "
        + "in the same %d regions", n, regions.size()) + refused);
  }

  /**
   * Writes the log as text: {@code R} and the regions' sizes, then one line per event:
   * {@code A bytes region offset op}, {@code F index}, {@code X bytes op}.
   */
  public void write(Path file) throws IOException {
    List<String> lines = new ArrayList<>(events.size() + 1);
    lines.add("R " + String.join(" ", regions.stream().map(String::valueOf).toList()));
    for (Event e : events) {
      if (e instanceof Alloc a) {
        lines.add("A " + a.bytes() + " " + a.region() + " " + a.offset() + " " + a.op());
      } else if (e instanceof Free f) {
        lines.add("F " + f.index());
      } else if (e instanceof Refused r) {
        lines.add("X " + r.bytes() + " " + r.op());
      }
    }
    Files.write(file, lines, StandardCharsets.UTF_8);
  }

  /** Reads what {@link #write} wrote ({@code #} lines are comments; an op may be left out). */
  public static AllocatorLog read(BufferedReader in) {
    List<Long> regions = new ArrayList<>();
    List<Event> events = new ArrayList<>();
    try {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        if (line.isBlank() || line.startsWith("#")) {
          continue;
        }
        String[] f = line.trim().split(" ");
        switch (f[0]) {
          case "R" -> {
            for (int i = 1; i < f.length; i++) {
              regions.add(Long.parseLong(f[i]));
            }
          }
          case "A" -> events.add(new Alloc(Long.parseLong(f[1]), Integer.parseInt(f[2]),
              Long.parseLong(f[3]), f.length > 4 ? f[4] : "?"));
          case "F" -> events.add(new Free(Integer.parseInt(f[1])));
          case "X" -> events.add(new Refused(Long.parseLong(f[1]), f.length > 2 ? f[2] : "?"));
          default -> throw new IllegalArgumentException("not an allocator log line: " + line);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new AllocatorLog(regions, events);
  }
}
