package dev.lms4j.core.graph;

/**
 * Names one output of one op by index.
 *
 * @param op     the producing op's id
 * @param output the output index
 */
public record TensorId(int op, int output) implements Comparable<TensorId> {
  @Override
  public int compareTo(TensorId o) {
    return op != o.op ? Integer.compare(op, o.op) : Integer.compare(output, o.output);
  }
}
