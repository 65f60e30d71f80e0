package dev.lms4j.tf;

import dev.lms4j.core.graph.Tensor;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The temporaries TensorFlow's CPU {@code Einsum} kernel allocates beside its output, from its
 * equation and shapes ({@code einsum_op_impl.h}): the kernel contracts two operands with one
 * batched matrix product, so it copies an operand whose labels are not in the order that product
 * reads (batch labels, then free, then contracted, each group by first appearance in the
 * equation; free and contracted may swap places, the product then reads the operand adjoint),
 * reduces a label only one operand has (a reduced copy), and where the output's labels are not
 * in the product's order (batch, the first operand's free labels, the second's) it computes the
 * product into a temporary and transposes that into the output.
 *
 * <p>Traced (this machine, allocator log, float32): {@code btd,dhk->bhtk} for x [16, 256, 512]
 * and w [512, 8, 64] asked for an 8 MiB product and then the 8 MiB output, the product freed as
 * the op ended (the weight read adjoint, not copied); {@code bhtk,bhsk->bhts} asked for its
 * 32 MiB output only. An attention stack written with einsum needs the output's copy: the
 * product's temporary holds one region while the output takes another.
 *
 * <pre>{@code
 * long bytes = EinsumTemps.bytes("btd,dhk->bhtk", List.of(x, w), out, 4);  // 8 MiB
 * long same = EinsumTemps.bytes("btd,dhk->bhtk", List.of(x, w), outputTensor);
 * }</pre>
 */
final class EinsumTemps {
  private EinsumTemps() {}

  /** Label kinds in the order the kernel sorts them. */
  private static final int BATCH = 1;
  private static final int FREE = 2;
  private static final int CONTRACT = 3;
  private static final int REDUCE = 4;

  /**
   * As below, for an output {@code out} of the model (its element size from its bytes and
   * shape; 4 where its bytes are not known).
   */
  static long bytes(String equation, List<long[]> inputShapes, Tensor out) {
    long n = elements(out.shape());
    return bytes(equation, inputShapes, out.shape(),
        out.bytes() > 0 && n > 0 ? out.bytes() / n : 4);
  }

  /**
   * The bytes of the temporaries, or 0 where the equation is not one the rule covers (one
   * operand, an ellipsis, a label repeated within an operand, unknown shapes).
   *
   * @param equation     the op's {@code equation} attribute
   * @param inputShapes  the two operands' shapes
   * @param outputShape  the output's shape
   * @param elementBytes bytes per element
   */
  static long bytes(String equation, List<long[]> inputShapes, long[] outputShape,
      long elementBytes) {
    String eq = equation.replace(" ", "");
    int arrow = eq.indexOf("->");
    if (arrow < 0 || eq.contains(".") || inputShapes.size() != 2) {
      return 0;
    }
    String[] ins = eq.substring(0, arrow).split(",", -1);
    String out = eq.substring(arrow + 2);
    if (ins.length != 2 || !distinct(ins[0]) || !distinct(ins[1]) || !distinct(out)) {
      return 0;
    }
    Map<Character, Integer> id = new HashMap<>();
    for (char c : eq.toCharArray()) {
      if (Character.isLetter(c)) {
        id.putIfAbsent(c, id.size());
      }
    }
    long temps = 0;
    List<List<Character>> free = new ArrayList<>();
    for (int k = 0; k < 2; k++) {
      String mine = ins[k];
      String other = ins[1 - k];
      long[] shape = inputShapes.get(k);
      if (shape == null || shape.length != mine.length() || !known(shape)) {
        return 0;
      }
      int[] kind = new int[mine.length()];
      boolean reduces = false;
      List<Character> myFree = new ArrayList<>();
      long reducedElements = 1;
      for (int i = 0; i < mine.length(); i++) {
        char c = mine.charAt(i);
        boolean inOther = other.indexOf(c) >= 0;
        boolean inOut = out.indexOf(c) >= 0;
        kind[i] = inOther && inOut ? BATCH : inOut ? FREE : inOther ? CONTRACT : REDUCE;
        if (kind[i] == REDUCE) {
          reduces = true;
        } else {
          reducedElements *= shape[i];
        }
        if (kind[i] == FREE) {
          myFree.add(c);
        }
      }
      myFree.sort((a, b) -> Integer.compare(id.get(a), id.get(b)));
      free.add(myFree);
      if (reduces) {
        temps += reducedElements * elementBytes;
      } else if (!sorted(mine, kind, id, false) && !sorted(mine, kind, id, true)) {
        temps += elements(shape) * elementBytes;
      }
    }
    if (outputShape == null || !known(outputShape)) {
      return 0;
    }
    // the product's labels: batch (by first appearance), the first operand's free, the second's
    List<Character> product = new ArrayList<>();
    List<Character> batch = new ArrayList<>();
    for (char c : out.toCharArray()) {
      if (ins[0].indexOf(c) >= 0 && ins[1].indexOf(c) >= 0) {
        batch.add(c);
      }
    }
    batch.sort((a, b) -> Integer.compare(id.get(a), id.get(b)));
    product.addAll(batch);
    product.addAll(free.get(0));
    product.addAll(free.get(1));
    StringBuilder p = new StringBuilder();
    product.forEach(p::append);
    if (!p.toString().equals(out)) {
      temps += elements(outputShape) * elementBytes;
    }
    return temps;
  }

  /**
   * Whether an operand's labels are in the kernel's order: by kind, then by first appearance;
   * with {@code swapped}, free and contracted labels change places (the operand read adjoint).
   */
  private static boolean sorted(String labels, int[] kind, Map<Character, Integer> id,
      boolean swapped) {
    for (int i = 0; i + 1 < labels.length(); i++) {
      int a = rank(kind[i], swapped);
      int b = rank(kind[i + 1], swapped);
      if (a > b || a == b && id.get(labels.charAt(i)) > id.get(labels.charAt(i + 1))) {
        return false;
      }
    }
    return true;
  }

  private static int rank(int kind, boolean swapped) {
    if (swapped && kind == FREE) {
      return CONTRACT;
    }
    if (swapped && kind == CONTRACT) {
      return FREE;
    }
    return kind;
  }

  private static boolean distinct(String labels) {
    return labels.chars().distinct().count() == labels.length()
        && labels.chars().allMatch(Character::isLetter);
  }

  private static boolean known(long[] shape) {
    for (long d : shape) {
      if (d < 0) {
        return false;
      }
    }
    return true;
  }

  private static long elements(long[] shape) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    return n;
  }
}
