package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Reassociation;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.graph.TensorId;
import dev.lms4j.core.memory.MemorySimulator;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Grappler's regrouping of products, predicted as TensorFlow 2.18 does it on the corpus encoder
 * (its partition graphs: {@code ProductGroupsTest} checks the prediction against them).
 *
 * <p>The attention graph: {@code Softmax(x)} (1 MiB), a backward {@code g} of the same size made
 * from the loss, {@code m = g * Softmax} and {@code root = m * c} with a scalar constant
 * {@code c}; the root is read by {@code out}.
 */
class ReassociationTest {
  private static final long MIB = 1 << 20;

  private static Tensor big() {
    return new Tensor("float32", new long[] {256, 1024}, MIB, false);
  }

  private static Tensor scalar() {
    return new Tensor("float32", new long[0], 4, false);
  }

  static DataflowGraph attention(boolean controlOut, String extraInput) {
    List<String> rootIn = new ArrayList<>(List.of("gradients/m", "c"));
    var b = DataflowGraph.builder().inPlaceReuse(true)
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), big())
        .op("c", "Const", OpCategory.FORWARD, List.of(), scalar())
        .op("Softmax", "Softmax", OpCategory.FORWARD, List.of("x"), big())
        .op("f", "Relu", OpCategory.FORWARD, List.of("Softmax"), big())
        .op("loss", "Sum", OpCategory.FORWARD, List.of("f"), scalar())
        .op("gradients/g", "Fill", OpCategory.BACKWARD, List.of("loss"), big())
        .op("gradients/m", "Mul", OpCategory.BACKWARD, List.of("gradients/g", "Softmax"), big())
        .op("gradients/root", "Mul", OpCategory.BACKWARD, rootIn, big())
        .op("gradients/out", "Relu", OpCategory.BACKWARD,
            extraInput == null ? List.of("gradients/root")
                : List.of("gradients/root", extraInput), big());
    if (controlOut) {
      b.op("gradients/after", "NoOp", OpCategory.BACKWARD, "", List.of("^gradients/m"),
          List.of());
    }
    return b.build();
  }

  /**
   * Where grappler's shape inference does not know the operands' shapes (the graph's
   * {@link dev.lms4j.core.graph.GrapplerShapes}: a softmax after a gather of fed ids, as in the
   * einsum encoder), its stage leaves the products as written; knowing them, it regroups.
   */
  @Test
  void productsWhoseShapesGrapplerDoesNotKnowStayAsWritten() {
    DataflowGraph unknown = attention(false, null).toBuilder().grapplerShapes(
        new dev.lms4j.core.graph.GrapplerShapes(Set.of(),
            Set.of("Softmax:0", "gradients/g:0", "gradients/m:0", "gradients/root:0")))
        .build();
    assertThat(unknown.shapeKnownToGrappler(new TensorId(unknown.opOrThrow("Softmax").id(), 0)))
        .isFalse();
    assertThat(Reassociation.predict(unknown, Set.of("loss", "gradients/out")).groups())
        .isEmpty();
    DataflowGraph known = attention(false, null).toBuilder().grapplerShapes(
        new dev.lms4j.core.graph.GrapplerShapes(Set.of(), Set.of())).build();
    assertThat(Reassociation.predict(known, Set.of("loss", "gradients/out")).groups())
        .hasSize(1);
  }

  private static List<String> inputs(DataflowGraph g, String op) {
    return g.opOrThrow(op).inputs().stream().map(t -> g.op(t.op()).name()).toList();
  }

  @Test
  void theConstantIsPairedWithTheSmallerNamedOperandAndTheProductMovesToTheForwardPass() {
    DataflowGraph g = attention(false, null);
    Reassociation.Prediction p = Reassociation.predict(g, Set.of("loss", "gradients/out"));
    assertThat(p.groups()).hasSize(1);
    Reassociation.Group gr = p.groups().get(0);
    assertThat(gr.exact()).isTrue();
    assertThat(gr.members()).extracting(m -> g.op(m).name())
        .containsExactly("gradients/root", "gradients/m");
    // leaves in grappler's order: c (sorted first in root), then Softmax before gradients/g
    // (by name: upper case first); by size c, Softmax, g; the odd last (g) stays with the root;
    // (c, Softmax) takes over m
    DataflowGraph r = Reassociation.apply(g, p);
    assertThat(inputs(r, "gradients/m")).containsExactly("c", "Softmax");
    assertThat(inputs(r, "gradients/root")).containsExactly("gradients/m", "gradients/g");
    // m now needs only the forward pass: it is ready at the softmax's level, not after g
    Levels lv = Levels.of(r);
    assertThat(lv.level(r.opOrThrow("gradients/m").id()))
        .isLessThan(lv.level(r.opOrThrow("gradients/g").id()));
    assertThat(Levels.of(g).level(g.opOrThrow("gradients/m").id()))
        .isGreaterThan(Levels.of(g).level(g.opOrThrow("gradients/g").id()));
    // and the levelled peak holds it from the forward pass on: one more MiB
    long before = MemorySimulator.simulate(g, Levels.of(g).schedule()).peakBytes();
    long after = MemorySimulator.simulate(r, lv.schedule()).peakBytes();
    assertThat(after).isGreaterThan(before);
  }

  @Test
  void anInnerProductWithAControlSuccessorOrAnotherReaderOrFetchedIsNotRegrouped() {
    assertThat(Reassociation.predict(attention(true, null), Set.of()).groups()).isEmpty();
    assertThat(Reassociation.predict(attention(false, "gradients/m"), Set.of()).groups())
        .isEmpty();
    assertThat(Reassociation.predict(attention(false, null), Set.of("gradients/m")).groups())
        .isEmpty();
    // the unchanged control case: the same graph without the edge is regrouped
    assertThat(Reassociation.predict(attention(false, null), Set.of()).groups()).hasSize(1);
  }

  @Test
  void aDivisionByAConstantIsAProductAndIdenticalProductsAreMerged() {
    // layer norm's gradient: t = Tile(...); q = t / n; a = q * d and its twin b = d * q (the two
    // halves of d * d's gradient); grappler merges b into a, then regroups a = (1/n * d) * t
    DataflowGraph g = DataflowGraph.builder().inPlaceReuse(true)
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), big())
        .op("n", "Const", OpCategory.FORWARD, List.of(), scalar())
        .op("Sub", "Sub", OpCategory.FORWARD, List.of("x", "x"), big())
        .op("loss", "Sum", OpCategory.FORWARD, List.of("Sub"), scalar())
        .op("gradients/t", "Fill", OpCategory.BACKWARD, List.of("loss"), big())
        .op("gradients/q", "RealDiv", OpCategory.BACKWARD, List.of("gradients/t", "n"), big())
        .op("gradients/a", "Mul", OpCategory.BACKWARD, List.of("gradients/q", "Sub"), big())
        .op("gradients/b", "Mul", OpCategory.BACKWARD, List.of("Sub", "gradients/q"), big())
        .op("gradients/sum", "AddN", OpCategory.BACKWARD, List.of("gradients/a", "gradients/b"),
            big())
        .build();
    Reassociation.Prediction p = Reassociation.predict(g, Set.of("loss"));
    assertThat(p.duplicates()).containsEntry(g.opOrThrow("gradients/b").id(),
        g.opOrThrow("gradients/a").id());
    assertThat(p.groups()).singleElement().satisfies(gr -> {
      assertThat(gr.exact()).isTrue();
      assertThat(gr.reciprocals()).containsExactly(g.opOrThrow("gradients/q").id());
    });
    DataflowGraph r = Reassociation.apply(g, p);
    // the reciprocal sorts as ConstantFolding/gradients/q_recip: before Sub and gradients/t
    assertThat(inputs(r, "gradients/q")).containsExactly("n", "Sub");
    assertThat(r.opOrThrow("gradients/q").type()).isEqualTo("Mul");
    assertThat(inputs(r, "gradients/a")).containsExactly("gradients/q", "gradients/t");
    assertThat(r.opOrThrow("gradients/b").type()).isEqualTo("Identity");
    assertThat(inputs(r, "gradients/b")).containsExactly("gradients/a");
  }

  @Test
  void leavesOfOneShapeAreLeftAsTheyAreAndASquareLeafIsNotExact() {
    DataflowGraph same = DataflowGraph.builder().inPlaceReuse(true)
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), big())
        .op("y", "Relu", OpCategory.FORWARD, List.of("x"), big())
        .op("m", "Mul", OpCategory.FORWARD, List.of("x", "y"), big())
        .op("root", "Mul", OpCategory.FORWARD, List.of("m", "y"), big())
        .op("out", "Relu", OpCategory.FORWARD, List.of("root"), big())
        .build();
    assertThat(Reassociation.predict(same, Set.of()).groups()).isEmpty();
    // tanh-GELU's cube: c * ((x * x) * x)
    DataflowGraph cube = DataflowGraph.builder().inPlaceReuse(true)
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), big())
        .op("c", "Const", OpCategory.FORWARD, List.of(), scalar())
        .op("sq", "Mul", OpCategory.FORWARD, List.of("x", "x"), big())
        .op("cube", "Mul", OpCategory.FORWARD, List.of("sq", "x"), big())
        .op("root", "Mul", OpCategory.FORWARD, List.of("c", "cube"), big())
        .op("out", "Relu", OpCategory.FORWARD, List.of("root"), big())
        .build();
    Reassociation.Prediction p = Reassociation.predict(cube, Set.of());
    assertThat(p.groups()).singleElement().satisfies(gr -> assertThat(gr.exact()).isFalse());
    assertThat(Reassociation.apply(cube, p)).isSameAs(cube);
    assertThat(inputs(Reassociation.regroup(cube, Set.of(), Set.of()), "cube"))
        .containsExactly("sq", "x");
  }

  @Test
  void opsRebuiltAlreadyAreLeftAlone() {
    DataflowGraph g = attention(false, null);
    assertThat(Reassociation.predict(g, Set.of(), Set.of("gradients/root", "gradients/m"))
        .groups()).isEmpty();
    // untagged, a rebuilt tree is regrouped again, and differently (root reads g and m, m reads
    // Softmax and c: g now comes first, and (c, g) are paired): why the tag is written with it
    DataflowGraph r = Reassociation.regroup(g, Set.of(), Set.of());
    DataflowGraph again = Reassociation.regroup(r, Set.of(), Set.of());
    assertThat(inputs(again, "gradients/m")).containsExactly("c", "gradients/g");
    DataflowGraph kept = Reassociation.regroup(r, Set.of(),
        Set.of("gradients/root", "gradients/m"));
    assertThat(kept.opOrThrow("gradients/m").inputs())
        .containsExactly(new TensorId(g.opOrThrow("c").id(), 0),
            new TensorId(g.opOrThrow("Softmax").id(), 0));
  }
}
