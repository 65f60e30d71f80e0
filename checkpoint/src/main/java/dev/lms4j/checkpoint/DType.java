package dev.lms4j.checkpoint;

import java.util.Locale;
import org.tensorflow.proto.DataType;
import org.tensorflow.types.TBfloat16;
import org.tensorflow.types.TBool;
import org.tensorflow.types.TFloat16;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TFloat64;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;
import org.tensorflow.types.TUint16;
import org.tensorflow.types.TUint8;
import org.tensorflow.types.family.TType;

/**
 * The fixed-size element types a checkpoint can hold, with the names used in manifests
 * ({@code float32}, {@code int64}, ...). Variable-length types (strings) are not supported: their
 * tensors have no flat byte image.
 *
 * <pre>{@code
 * DType t = DType.fromName("float32");      // DType.FLOAT32, 4 bytes per element
 * DType u = DType.of(DataType.DT_INT64);    // DType.INT64
 * }</pre>
 */
public enum DType {
  /** 32-bit IEEE float ({@code DT_FLOAT}). */
  FLOAT32("float32", DataType.DT_FLOAT, TFloat32.class, 4),
  /** 64-bit IEEE float ({@code DT_DOUBLE}). */
  FLOAT64("float64", DataType.DT_DOUBLE, TFloat64.class, 8),
  /** 16-bit IEEE float ({@code DT_HALF}). */
  FLOAT16("float16", DataType.DT_HALF, TFloat16.class, 2),
  /** bfloat16 ({@code DT_BFLOAT16}). */
  BFLOAT16("bfloat16", DataType.DT_BFLOAT16, TBfloat16.class, 2),
  /** 32-bit signed integer ({@code DT_INT32}). */
  INT32("int32", DataType.DT_INT32, TInt32.class, 4),
  /** 64-bit signed integer ({@code DT_INT64}). */
  INT64("int64", DataType.DT_INT64, TInt64.class, 8),
  /** 8-bit unsigned integer ({@code DT_UINT8}). */
  UINT8("uint8", DataType.DT_UINT8, TUint8.class, 1),
  /** 16-bit unsigned integer ({@code DT_UINT16}). */
  UINT16("uint16", DataType.DT_UINT16, TUint16.class, 2),
  /** Boolean, one byte per element ({@code DT_BOOL}). */
  BOOL("bool", DataType.DT_BOOL, TBool.class, 1);

  private final String manifestName;
  private final DataType tfType;
  private final Class<? extends TType> tensorClass;
  private final int byteSize;

  DType(String manifestName, DataType tfType, Class<? extends TType> tensorClass, int byteSize) {
    this.manifestName = manifestName;
    this.tfType = tfType;
    this.tensorClass = tensorClass;
    this.byteSize = byteSize;
  }

  /** The manifest name, e.g. {@code float32}. */
  public String manifestName() {
    return manifestName;
  }

  /** TensorFlow's data type. */
  public DataType tfType() {
    return tfType;
  }

  /** The TensorFlow Java tensor class, e.g. {@code TFloat32.class}. */
  public Class<? extends TType> tensorClass() {
    return tensorClass;
  }

  /** Bytes per element. */
  public int byteSize() {
    return byteSize;
  }

  /**
   * The type of TensorFlow's {@code type} (reference types such as {@code DT_FLOAT_REF} map to
   * their base type).
   *
   * @throws IllegalArgumentException for strings, resources, variants and other types without a
   *     fixed element size
   */
  public static DType of(DataType type) {
    String n = type.name();
    DataType base = n.endsWith("_REF") ? DataType.valueOf(n.substring(0, n.length() - 4)) : type;
    for (DType d : values()) {
      if (d.tfType == base) {
        return d;
      }
    }
    throw new IllegalArgumentException("unsupported tensor type " + type
        + " for checkpoints (supported: " + supportedNames() + ")");
  }

  /**
   * The type with manifest name {@code name} (case-insensitive).
   *
   * @throws IllegalArgumentException when no type has that name
   */
  public static DType fromName(String name) {
    for (DType d : values()) {
      if (d.manifestName.equals(name.toLowerCase(Locale.ROOT))) {
        return d;
      }
    }
    throw new IllegalArgumentException("unknown dtype '" + name + "' (expected one of "
        + supportedNames() + ")");
  }

  private static String supportedNames() {
    StringBuilder sb = new StringBuilder();
    for (DType d : values()) {
      sb.append(sb.length() == 0 ? "" : ", ").append(d.manifestName);
    }
    return sb.toString();
  }

  @Override
  public String toString() {
    return manifestName;
  }
}
