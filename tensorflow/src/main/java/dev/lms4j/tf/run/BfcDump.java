package dev.lms4j.tf.run;

import dev.lms4j.core.report.Sizes;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What TensorFlow's BFC allocator says of itself when it runs out of memory: the dump it logs
 * at INFO level after "ran out of memory trying to allocate" (bins, regions, chunks, totals),
 * read into the figures that tell a too-small budget from fragmentation: the regions it grew,
 * the bytes in use against the bytes the ops asked for (a chunk is handed out whole unless it
 * is at least twice the request), and the largest free chunk.
 *
 * <p>Workers keep the dump when {@code LMS4J_BFC_DUMP} names a file ({@link WorkerProcess});
 * the summary then ends the out-of-memory message.
 *
 * <pre>{@code
 * BfcDump d = BfcDump.parse(lines);
 * d.requestedBytes();  // what the ops asked for
 * d.describe();        // "regions 30, 16, 8, 4, 2 MiB of a 60 MiB limit; ..."
 * }</pre>
 *
 * @param regionBytes      sizes of the allocator's regions, in the dump's order
 * @param limitBytes       its memory limit (-1 when the dump does not say)
 * @param inUseBytes       bytes of the chunks in use
 * @param inUseChunks      how many chunks are in use
 * @param requestedBytes   bytes the ops asked for, of the chunks in use
 * @param worstBinBytes    the bin whose chunks hold the most beyond their requests (its size)
 * @param worstBinChunks   chunks in use in that bin
 * @param worstBinInUse    bytes of those chunks
 * @param worstBinRequested bytes requested of them
 * @param largestFreeBytes the largest free chunk (0 when none)
 */
public record BfcDump(List<Long> regionBytes, long limitBytes, long inUseBytes,
    int inUseChunks, long requestedBytes, long worstBinBytes, int worstBinChunks,
    long worstBinInUse, long worstBinRequested, long largestFreeBytes) {

  private static final Pattern BIN = Pattern.compile("Bin \\((\\d+)\\):\\s*Total Chunks: \\d+, "
      + "Chunks in use: (\\d+)\\. \\S+ allocated for chunks\\. (\\S+) in use in bin\\. (\\S+) "
      + "client-requested in use in bin");
  private static final Pattern REGION = Pattern.compile("Next region of size (\\d+)");
  private static final Pattern FREE = Pattern.compile("Free {2}at \\w+ of size (\\d+)");
  private static final Pattern LIMIT = Pattern.compile("memory_limit_: (\\d+)");
  private static final Pattern STATS_LIMIT = Pattern.compile("^Limit:\\s+(\\d+)");
  private static final Pattern END = Pattern.compile("bfc_allocator\\.cc:\\d+\\]\\s*[*x]+\\s*$");

  /** True for the line of asterisks that ends a dump (a map of the memory, x for free). */
  public static boolean isEnd(String line) {
    return END.matcher(line).find();
  }

  /** Reads a dump from its lines (log prefixes are ignored); null when no bin line is found. */
  public static BfcDump parse(List<String> lines) {
    List<Long> regions = new ArrayList<>();
    long limit = -1;
    long inUse = 0;
    int chunks = 0;
    long requested = 0;
    long worstWaste = -1;
    long worstBin = 0;
    int worstChunks = 0;
    long worstInUse = 0;
    long worstRequested = 0;
    long largestFree = 0;
    boolean bins = false;
    for (String line : lines) {
      Matcher m = BIN.matcher(line);
      if (m.find()) {
        bins = true;
        int n = Integer.parseInt(m.group(2));
        long used = bytes(m.group(3));
        long asked = bytes(m.group(4));
        chunks += n;
        inUse += used;
        requested += asked;
        if (n > 0 && used - asked > worstWaste) {
          worstWaste = used - asked;
          worstBin = Long.parseLong(m.group(1));
          worstChunks = n;
          worstInUse = used;
          worstRequested = asked;
        }
        continue;
      }
      if ((m = REGION.matcher(line)).find()) {
        regions.add(Long.parseLong(m.group(1)));
      } else if ((m = FREE.matcher(line)).find()) {
        largestFree = Math.max(largestFree, Long.parseLong(m.group(1)));
      } else if ((m = LIMIT.matcher(line)).find()) {
        limit = Long.parseLong(m.group(1));
      } else if (limit < 0 && (m = STATS_LIMIT.matcher(line.strip())).find()) {
        limit = Long.parseLong(m.group(1));
      }
    }
    if (!bins) {
      return null;
    }
    return new BfcDump(List.copyOf(regions), limit, inUse, chunks, requested, worstBin,
        worstChunks, worstInUse, worstRequested, largestFree);
  }

  /** Bytes in use beyond what the ops asked for: the whole chunks' slack. */
  public long slackBytes() {
    return Math.max(0, inUseBytes - requestedBytes);
  }

  /** One line: regions, bytes in use against requested, the worst bin, the largest free chunk. */
  public String describe() {
    StringBuilder s = new StringBuilder("allocator at the failure: regions ");
    List<String> r = new ArrayList<>();
    for (long b : regionBytes) {
      r.add(size(b, false));
    }
    s.append(r.isEmpty() ? "none" : String.join(", ", r));
    if (limitBytes > 0) {
      s.append(" of a ").append(size(limitBytes, true)).append(" limit");
    }
    s.append(String.format(Locale.ROOT, "; %s in %d chunks in use for %s requested",
        size(inUseBytes, true), inUseChunks, size(requestedBytes, true)));
    if (slackBytes() > 0) {
      s.append(String.format(Locale.ROOT, " (%s in whole chunks, most in bin %s: %d of %s for %s)",
          size(slackBytes(), true), size(worstBinBytes, true), worstBinChunks,
          size(worstBinInUse, true), size(worstBinRequested, true)));
    }
    s.append("; largest free chunk ").append(size(largestFreeBytes, true));
    return s.toString();
  }

  private static String size(long bytes, boolean unit) {
    double mib = bytes / 1048576.0;
    if (bytes >= 1 << 20 || bytes == 0) {
      String v = mib == Math.rint(mib) ? String.valueOf((long) mib)
          : String.format(Locale.ROOT, "%.1f", mib);
      return unit || bytes == 0 ? v + " MiB" : v;
    }
    return String.format(Locale.ROOT, "%.1f KiB", bytes / 1024.0);
  }

  /** TensorFlow's human sizes: 0B, 5.1KiB, 1.66MiB, 2.0GiB ({@link Sizes#parse}, and 0B). */
  static long bytes(String human) {
    return human.equals("0B") ? 0 : Sizes.parse(human);
  }
}
