package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Op;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.core.Variable;
import org.tensorflow.op.random.RandomStandardNormal;
import org.tensorflow.op.random.RandomUniform;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.types.TFloat32;

/**
 * {@link InitOrder}: the named variables' initializers run last, after a primer that waits for
 * every other initializer; a step runs none of it, and the losses are those of the graph as
 * given.
 */
class InitOrderTest {

  /**
   * Three variables, {@code big} [256, 64], {@code mid} [64, 64] and {@code small} [64],
   * initialized from seeded normal draws (scaled) in that order, plus a step that reads all three
   * and updates them by gradient descent. With {@code readsBig}, {@code mid}'s initial value is
   * {@code big}'s (after {@code big}'s assign), as Python's {@code initialized_value} makes it.
   */
  private static TrainingGraph threeVariables(boolean readsBig) {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(8, 256)));
      List<Op> assigns = new ArrayList<>();
      List<Variable<TFloat32>> vars = new ArrayList<>();
      long[][] shapes = {{256, 64}, {64, 64}, {64}};
      String[] names = {"big", "mid", "small"};
      for (int i = 0; i < 3; i++) {
        Variable<TFloat32> v = tf.withName(names[i]).variable(Shape.of(shapes[i]),
            TFloat32.class);
        Operand<TFloat32> value;
        if (readsBig && i == 1) {
          value = tf.withName("mid_init_from_big").withControlDependencies(
              List.of(assigns.get(0))).math.mul(tf.slice(vars.get(0),
              tf.constant(new long[] {0, 0}), tf.constant(new long[] {64, 64})),
              tf.constant(0.5f));
        } else {
          value = tf.withName(names[i] + "_init_scaled").math.mul(
              tf.withName(names[i] + "_init_normal").random.randomStandardNormal(
                  tf.constant(shapes[i]), TFloat32.class, RandomStandardNormal.seed(3L),
                  RandomStandardNormal.seed2(i + 1L)), tf.constant(0.05f));
        }
        assigns.add(tf.withName(names[i] + "_assign").assign(v, value));
        vars.add(v);
      }
      tf.withName("init").withControlDependencies(assigns).noOp();
      Operand<TFloat32> h = tf.nn.relu(tf.linalg.matMul(tf.linalg.matMul(x, vars.get(0)),
          vars.get(1)));
      Operand<TFloat32> loss = tf.withName("loss").math.mean(tf.math.square(tf.math.add(h,
          vars.get(2))), tf.constant(new int[] {0, 1}));
      var grads = g.addGradients(loss.asOutput(), new org.tensorflow.Output<?>[] {
          vars.get(0).asOutput(), vars.get(1).asOutput(), vars.get(2).asOutput()});
      List<Op> updates = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        updates.add(tf.withName(names[i] + "_update").train.applyGradientDescent(vars.get(i),
            tf.constant(0.1f), grads[i].expect(TFloat32.class)));
      }
      tf.withName("train").withControlDependencies(updates).noOp();
      Manifest m = new Manifest(List.of(new Manifest.Feed("x", "float32", new long[] {8, 256},
          "normal")), "loss:0", "train", "init");
      return new TrainingGraph(g.toGraphDef(), m);
    }
  }

  @Test
  void theNamedVariablesComeLastAfterThePrimerAndTheLossesStayTheSame() {
    TrainingGraph tg = threeVariables(false);
    Manifest m = tg.manifest();
    InitOrder.Result r = InitOrder.apply(tg.graphDef(), m.init(), m.runOps(),
        List.of("mid", "big"), 2 << 20);
    assertThat(r.changed()).as(String.valueOf(r.reason())).isTrue();
    GraphDef gd = r.graphDef();
    Map<String, NodeDef> after = TfTests.nodes(gd);
    NodeDef primer = after.get(InitOrder.PRIMER);
    assertThat(primer.getOp()).isEqualTo("RandomUniform");
    // the primer waits for the other variable's initializer, and is what init waits for first
    assertThat(primer.getInputList()).contains("^small_assign");
    Set<String> midNeeds = GraphImporter.ancestors(gd, Set.of("mid_assign"));
    Set<String> bigNeeds = GraphImporter.ancestors(gd, Set.of("big_assign"));
    assertThat(midNeeds).contains(InitOrder.PRIMER, "small_assign").doesNotContain("big_assign");
    assertThat(bigNeeds).contains(InitOrder.PRIMER, "mid_assign", "small_assign");
    assertThat(GraphImporter.ancestors(gd, Set.of("small_assign")))
        .doesNotContain(InitOrder.PRIMER, "mid_assign", "big_assign");
    // 1 edge into the primer, 3 ops of mid's initializer after it, 3 of big's after mid_assign
    assertThat(r.addedEdges()).isEqualTo(7);
    // a step runs none of it: the ops it runs are those of the graph as given, unchanged
    Map<String, NodeDef> before = TfTests.nodes(tg.graphDef());
    for (String op : GraphImporter.ancestors(gd, m.runOps())) {
      assertThat(after.get(op)).as(op).isEqualTo(before.get(op));
    }
    assertThat(TfTests.losses(gd, m)).containsExactlyElementsOf(
        TfTests.losses(tg.graphDef(), m));
  }

  @Test
  void withoutAPrimerTheFirstLastVariableWaitsForTheOthers() {
    TrainingGraph tg = threeVariables(false);
    InitOrder.Result r = InitOrder.apply(tg.graphDef(), "init", tg.manifest().runOps(),
        List.of("big"), 0);
    assertThat(r.changed()).isTrue();
    assertThat(TfTests.nodes(r.graphDef())).doesNotContainKey(InitOrder.PRIMER);
    assertThat(GraphImporter.ancestors(r.graphDef(), Set.of("big_assign")))
        .contains("mid_assign", "small_assign");
  }

  @Test
  void aPrimerMadeFirstRunsBeforeEveryInitializer() {
    TrainingGraph tg = threeVariables(false);
    InitOrder.Result r = InitOrder.apply(tg.graphDef(), "init", tg.manifest().runOps(),
        List.of("big"), 4 << 20, true);
    assertThat(r.changed()).isTrue();
    GraphDef gd = r.graphDef();
    assertThat(TfTests.nodes(gd).get(InitOrder.PRIMER).getInputList())
        .containsExactly(InitOrder.PRIMER + "/shape");
    for (String a : List.of("small_assign", "mid_assign", "big_assign")) {
      assertThat(GraphImporter.ancestors(gd, Set.of(a))).as(a).contains(InitOrder.PRIMER);
    }
    assertThat(GraphImporter.ancestors(gd, Set.of("big_assign")))
        .contains("mid_assign", "small_assign");
    assertThat(TfTests.losses(gd, tg.manifest())).containsExactlyElementsOf(
        TfTests.losses(tg.graphDef(), tg.manifest()));
  }

  /**
   * The one-region primer is a MiB above the largest region the allocator grows below the limit
   * (the size it doubles to for it is then above the limit, so its region is all of it), made
   * before every initializer; the losses stay the same, and a graph that has a primer already or
   * a limit under 4 MiB gets none.
   */
  @Test
  void aOneRegionPrimerIsMadeBeforeEveryInitializer() {
    long mib = 1 << 20;
    assertThat(InitOrder.oneRegionPrimer(201 * mib)).isEqualTo(129 * mib);
    assertThat(InitOrder.oneRegionPrimer(256 * mib)).isEqualTo(129 * mib);
    assertThat(InitOrder.oneRegionPrimer(27 * mib)).isEqualTo(17 * mib);
    assertThat(InitOrder.oneRegionPrimer(4 * mib)).isEqualTo(3 * mib);
    assertThat(InitOrder.oneRegionPrimer(3 * mib)).isZero();
    TrainingGraph tg = threeVariables(false);
    GraphDef gd = InitOrder.oneRegion(tg.graphDef(), "init", tg.manifest().runOps(), 64 * mib);
    assertThat(gd).isNotNull();
    for (String a : List.of("small_assign", "mid_assign", "big_assign")) {
      assertThat(GraphImporter.ancestors(gd, Set.of(a))).as(a).contains(InitOrder.PRIMER);
    }
    assertThat(TfTests.losses(gd, tg.manifest())).containsExactlyElementsOf(
        TfTests.losses(tg.graphDef(), tg.manifest()));
    assertThat(InitOrder.oneRegion(gd, "init", tg.manifest().runOps(), 64 * mib)).isNull();
    assertThat(InitOrder.oneRegion(tg.graphDef(), "init", tg.manifest().runOps(), 3 * mib))
        .isNull();
    assertThat(InitOrder.oneRegion(tg.graphDef(), null, tg.manifest().runOps(), 64 * mib))
        .isNull();
  }

  /**
   * The variables whose initializer runs an op are those whose assign reads its value through
   * data edges: control edges (the serial order's, a primer's, an initializer that waits for
   * another variable) do not count, and a step's op or one outside init names none. Created
   * last in one region, the variable's initializer waits for the others', the same losses.
   */
  @Test
  void theVariableAnInitOpInitializesIsCreatedLastInOneRegion() {
    long mib = 1 << 20;
    TrainingGraph tg = threeVariables(false);
    Set<String> run = tg.manifest().runOps();
    assertThat(InitOrder.initializing(tg.graphDef(), "init", run, "big_init_normal"))
        .containsExactly("big");
    assertThat(InitOrder.initializing(tg.graphDef(), "init", run, "small_init_scaled"))
        .containsExactly("small");
    assertThat(InitOrder.initializing(tg.graphDef(), "init", run, "loss")).isEmpty();
    assertThat(InitOrder.initializing(tg.graphDef(), "init", run, null)).isEmpty();
    assertThat(InitOrder.initializing(tg.graphDef(), null, run, "big_init_normal")).isEmpty();
    // mid's initializer waits for big's assign and reads big itself, not big's draw
    TrainingGraph reads = threeVariables(true);
    assertThat(InitOrder.initializing(reads.graphDef(), "init", reads.manifest().runOps(),
        "big_init_normal")).containsExactly("big");
    assertThat(InitOrder.initializing(reads.graphDef(), "init", reads.manifest().runOps(),
        "mid_init_from_big")).containsExactly("mid");
    GraphDef gd = InitOrder.oneRegion(tg.graphDef(), "init", run, 64 * mib, List.of("big"));
    assertThat(gd).isNotNull();
    // the primer's control edges reach every initializer op, and still count for nothing
    assertThat(InitOrder.initializing(gd, "init", run, "big_init_normal"))
        .containsExactly("big");
    assertThat(GraphImporter.ancestors(gd, Set.of("big_init_normal")))
        .contains(InitOrder.PRIMER, "small_assign", "mid_assign");
    assertThat(GraphImporter.ancestors(gd, Set.of("small_assign"))).contains(InitOrder.PRIMER)
        .doesNotContain("big_assign");
    assertThat(TfTests.losses(gd, tg.manifest())).containsExactlyElementsOf(
        TfTests.losses(tg.graphDef(), tg.manifest()));
  }

  /** A resource variable's initializer is found through its {@code AssignVariableOp}. */
  @Test
  void aResourceVariablesInitializerIsFoundThroughItsAssignVariableOp() {
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      var h = tf.withName("table").varHandleOp(TFloat32.class, Shape.of(64, 8));
      Operand<TFloat32> draw = tf.withSubScope("table_init").withName("draw").random.randomUniform(
          tf.constant(new long[] {64, 8}), TFloat32.class, RandomUniform.seed(3L),
          RandomUniform.seed2(4L));
      Op assign = tf.withName("table_assign").assignVariableOp(h,
          tf.withSubScope("table_init").withName("scaled").math.mul(draw, tf.constant(0.1f)));
      tf.withName("init").withControlDependencies(List.of(assign)).noOp();
      Operand<TFloat32> read = tf.withName("table_read").readVariableOp(h, TFloat32.class);
      tf.withName("loss").math.mean(tf.math.square(read), tf.constant(new int[] {0, 1}));
      GraphDef gd = g.toGraphDef();
      assertThat(InitOrder.initializing(gd, "init", Set.of("loss"), "table_init/draw"))
          .containsExactly("table");
      assertThat(InitOrder.initializing(gd, "init", Set.of("loss"), "table_read")).isEmpty();
      assertThat(InitOrder.initializing(gd, "init", Set.of("loss"), "table")).isEmpty();
    }
  }

  @Test
  void whatCannotBeOrderedIsLeftAsGivenWithAReason() {
    TrainingGraph tg = threeVariables(true);
    Set<String> step = tg.manifest().runOps();
    // mid's initializer reads big: big's initializer is the other's too
    InitOrder.Result shared = InitOrder.apply(tg.graphDef(), "init", step, List.of("big"),
        2 << 20);
    assertThat(shared.changed()).isFalse();
    assertThat(shared.graphDef()).isSameAs(tg.graphDef());
    assertThat(shared.reason()).contains("shared");
    // mid before big, though mid's initial value is big's: a cycle
    InitOrder.Result cycle = InitOrder.apply(tg.graphDef(), "init", step,
        List.of("big", "mid"), 0);
    assertThat(cycle.changed()).isFalse();
    assertThat(cycle.graphDef()).isSameAs(tg.graphDef());
    assertThat(cycle.reason()).contains("cycle");
    assertThat(InitOrder.apply(tg.graphDef(), null, step, List.of("mid"), 0).reason())
        .contains("no init op");
    assertThat(InitOrder.apply(tg.graphDef(), "init", step, List.of("x"), 0).reason())
        .contains("no initializer for x");
  }
}
