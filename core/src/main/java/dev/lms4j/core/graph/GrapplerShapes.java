package dev.lms4j.core.graph;

import java.util.Set;

/**
 * What grappler's shape inference knows of a graph's tensors before a step runs, where it differs
 * from the static shapes the model sizes tensors by: grappler takes a tensor the session feeds as
 * of unknown shape, unknown rank included, and infers on from there (a {@code MatMul} fixes the
 * rank again, a {@code Reshape} to a constant shape the whole shape; a gather of fed ids keeps the
 * rank unknown). The importer finds both sets by inferring the graph's shapes a second time with
 * the feeds' shapes unknown, with TensorFlow's own shape functions.
 *
 * @param dynamicShapeReads the shape reads ({@code Shape}, {@code ShapeN}, {@code Size},
 *                          {@code Rank}, {@code ZerosLike}, {@code OnesLike}, by op name) whose
 *                          input grappler cannot size, so constant folding leaves them to the step
 *                          ({@link DataflowGraph#dynamicShapeReads()})
 * @param unknownShape      the tensors ({@code "op:i"}) whose shape grappler does not fully
 *                          know: its arithmetic optimizer regroups no product
 *                          whose operands or result are among them
 *                          ({@code MinimizeBroadcasts} wants shapes it can prove broadcastable;
 *                          where it can prove two unknown dimensions equal, this says no more)
 */
public record GrapplerShapes(Set<String> dynamicShapeReads, Set<String> unknownShape) {
  /** Copies both sets. */
  public GrapplerShapes {
    dynamicShapeReads = Set.copyOf(dynamicShapeReads);
    unknownShape = Set.copyOf(unknownShape);
  }
}
