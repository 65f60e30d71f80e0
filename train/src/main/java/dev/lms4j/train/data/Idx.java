package dev.lms4j.train.data;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.zip.GZIPInputStream;
import java.util.zip.ZipException;

/**
 * Reads IDX files of unsigned bytes (the MNIST format), gzip-compressed or not: a big-endian
 * header {@code 0x00 0x00 0x08 <rank>}, then {@code rank} 32-bit sizes, then the bytes in
 * row-major order. Bad content gives an {@link IllegalArgumentException} naming the file.
 */
final class Idx {

  /** The type code of unsigned bytes in the third header byte. */
  static final int UBYTE = 0x08;

  /**
   * A decoded file.
   *
   * @param dims the sizes, outermost first
   * @param data the elements, row-major
   */
  record Array(int[] dims, byte[] data) {}

  private Idx() {}

  /**
   * Reads a whole IDX file of unsigned bytes.
   *
   * @param file the file; gzip is detected from its first two bytes
   * @param rank the expected number of dimensions
   * @throws IllegalArgumentException when the content is not such a file
   */
  static Array read(Path file, int rank) throws IOException {
    try (InputStream raw = new BufferedInputStream(Files.newInputStream(file), 1 << 16)) {
      raw.mark(2);
      int b0 = raw.read();
      int b1 = raw.read();
      raw.reset();
      boolean gzip = b0 == 0x1f && b1 == 0x8b;
      try (DataInputStream in = new DataInputStream(
          gzip ? new BufferedInputStream(new GZIPInputStream(raw, 1 << 16), 1 << 16) : raw)) {
        return read(file, in, rank);
      } catch (ZipException e) {
        throw new IllegalArgumentException(file + ": corrupt gzip data (" + e.getMessage() + ")",
            e);
      } catch (EOFException e) {
        throw new IllegalArgumentException(file + ": truncated (the "
            + (gzip ? "gzip stream" : "file") + " ends early)", e);
      }
    }
  }

  private static Array read(Path file, DataInputStream in, int rank) throws IOException {
    byte[] header = new byte[4];
    int got = in.readNBytes(header, 0, 4);
    if (got < 4) {
      throw new IllegalArgumentException(file + ": not an IDX file (" + got + " bytes long)");
    }
    int magic = ((header[0] & 0xff) << 24) | ((header[1] & 0xff) << 16)
        | ((header[2] & 0xff) << 8) | (header[3] & 0xff);
    int expected = (UBYTE << 8) | rank;
    if (header[0] != 0 || header[1] != 0) {
      throw new IllegalArgumentException(file + ": not an IDX file: magic number "
          + hex(magic) + ", expected " + hex(expected));
    }
    if ((header[2] & 0xff) != UBYTE) {
      throw new IllegalArgumentException(file + ": IDX element type 0x"
          + Integer.toHexString(header[2] & 0xff) + " is not unsigned bytes (0x08): magic number "
          + hex(magic) + ", expected " + hex(expected));
    }
    if ((header[3] & 0xff) != rank) {
      throw new IllegalArgumentException(file + ": IDX rank " + (header[3] & 0xff)
          + ", expected " + rank + ": magic number " + hex(magic) + ", expected "
          + hex(expected));
    }
    int[] dims = new int[rank];
    long total = 1;
    for (int i = 0; i < rank; i++) {
      dims[i] = in.readInt();
      if (dims[i] < 0) {
        throw new IllegalArgumentException(file + ": negative size " + dims[i] + " in "
            + "dimension " + i);
      }
      total *= dims[i];
      if (total > Integer.MAX_VALUE - 8) {
        throw new IllegalArgumentException(file + ": sizes " + Arrays.toString(dims)
            + " are too large");
      }
    }
    byte[] data = new byte[(int) total];
    int n = in.readNBytes(data, 0, data.length);
    if (n < data.length) {
      throw new IllegalArgumentException(file + ": truncated: sizes " + Arrays.toString(dims)
          + " need " + data.length + " bytes of data, found " + n);
    }
    if (in.read() != -1) {
      throw new IllegalArgumentException(file + ": " + "trailing bytes after the "
          + data.length + " bytes that sizes " + Arrays.toString(dims) + " need");
    }
    return new Array(dims, data);
  }

  private static String hex(int v) {
    return String.format("0x%08x", v);
  }
}
