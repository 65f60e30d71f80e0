package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.memory.BfcReplay;
import dev.lms4j.core.plan.LmsMode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.math.Add;
import org.tensorflow.op.math.Neg;
import org.tensorflow.op.math.Square;
import org.tensorflow.types.TFloat32;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * {@link SerialOrder}: the ops of a step form one chain in the levelled order, init still runs
 * on its own, and the losses are those of the unchained graph.
 */
class SerialOrderTest {

  @Test
  void theStepRunsAsOneChainInTheLevelledOrderWithTheSameLosses() {
    TrainingGraph tg = AdamNet.mlp(256, 64, 4);
    // an LMS-rewritten graph, as a data-parallel worker chains it: recomputes under a budget
    // below the unplanned peak (at the default memory ratio)
    long peak = Lms.builder().budget(1L << 30).mode(LmsMode.REMAT).build().rewrite(tg)
        .predictedPeakBefore();
    LmsResult lms = Lms.builder().budget(peak).mode(LmsMode.REMAT).build().rewrite(tg);
    assertThat(lms.memoryPlan().needed()).isTrue();
    GraphDef rewritten = lms.graphDef();
    SerialOrder.Result r = SerialOrder.enforce(rewritten, tg.manifest());
    assertThat(r.reason()).isNull();

    DataflowGraph model = GraphImporter.importGraph(rewritten, tg.manifest().feedShapes(), -1,
        "gradients", tg.manifest().runOps());
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    java.util.Set<String> stepAncestors = GraphImporter.ancestors(rewritten,
        tg.manifest().runOps());
    // the ops TensorFlow fuses or removes where no control edge holds them stay out of it
    java.util.Set<String> leftOut = UnchainedOps.of(rewritten, stepAncestors);
    assertThat(leftOut).as("the MatMul + BiasAdd pairs and the identities").isNotEmpty();
    List<String> chain = new ArrayList<>();
    for (int id : Levels.of(model).schedule()) {
      String name = model.op(id).name();
      // resident ops, the init op and the initializers init leaves held are not step ops
      if (!OpTypes.isResident(model.op(id).type()) && !name.equals("Init")
          && !BfcReplay.HELD.equals(model.op(id).type()) && !leftOut.contains(name)) {
        chain.add(name);
      }
    }
    assertThat(r.chained()).isEqualTo(chain.size());
    // one control edge per consecutive pair of the chain, except where the rewritten graph
    // already had exactly that control edge (a data edge is not one: the pair still gets it)
    Map<String, NodeDef> before = TfTests.nodes(rewritten);
    int missing = 0;
    for (int k = 1; k < chain.size(); k++) {
      if (!before.get(chain.get(k)).getInputList().contains("^" + chain.get(k - 1))) {
        missing++;
      }
    }
    // init's own ops (not the step's, not resident, not folded before init runs) form a chain
    // of their own, in graph order
    java.util.Set<String> initAncestors = GraphImporter.ancestors(rewritten,
        java.util.Set.of(tg.manifest().init()));
    java.util.Set<String> folded = InitHeldConstants.folded(rewritten.getNodeList());
    List<String> initChain = new ArrayList<>();
    for (NodeDef n : rewritten.getNodeList()) {
      if (initAncestors.contains(n.getName()) && !stepAncestors.contains(n.getName())
          && !OpTypes.isResident(n.getOp()) && !n.getName().equals(tg.manifest().init())
          && !folded.contains(n.getName())) {
        initChain.add(n.getName());
      }
    }
    assertThat(initChain).hasSizeGreaterThan(4);
    // the framework Adam's slot fills, Fill(Shape(var), Cast(Const 0)), are folded: they get no
    // control edge (one would keep TensorFlow from merging a variable's two equal fills)
    List<String> slotFills = rewritten.getNodeList().stream()
        .filter(n -> n.getOp().equals("Fill") && initAncestors.contains(n.getName())
            && !stepAncestors.contains(n.getName())).map(NodeDef::getName).toList();
    assertThat(slotFills).hasSizeGreaterThanOrEqualTo(8).allSatisfy(f -> {
      assertThat(folded).contains(f);
      assertThat(after.get(f).getInputList()).noneMatch(in -> in.startsWith("^"));
    });
    assertThat(r.initChained()).isEqualTo(initChain.size());
    for (int k = 1; k < initChain.size(); k++) {
      if (!before.get(initChain.get(k)).getInputList().contains("^" + initChain.get(k - 1))) {
        missing++;
      }
      assertThat(after.get(initChain.get(k)).getInputList()).as(initChain.get(k))
          .contains("^" + initChain.get(k - 1));
    }
    assertThat(r.addedEdges()).isEqualTo(missing)
        .isEqualTo(controlInputs(r.graphDef()) - controlInputs(rewritten));
    // no step op waits for an init op, and no op the step runs joined init's chain
    for (String name : stepAncestors) {
      for (String in : after.get(name).getInputList()) {
        assertThat(in.startsWith("^") && initChain.contains(in.substring(1))).as(name + " " + in)
            .isFalse();
      }
    }
    // each op of the chain waits for the one before it (a control edge, or the data edge it had)
    for (int k = 1; k < chain.size(); k++) {
      String prev = chain.get(k - 1);
      assertThat(after.get(chain.get(k)).getInputList()).as(chain.get(k))
          .anyMatch(in -> in.equals("^" + prev) || in.equals(prev) || in.startsWith(prev + ":"));
    }
    // the init subgraph gets no edge from a step op, so init runs without the step's feeds
    assertThat(TfTests.losses(r.graphDef(), tg.manifest()))
        .containsExactlyElementsOf(TfTests.losses(rewritten, tg.manifest()))
        .containsExactlyElementsOf(TfTests.losses(tg.graphDef(), tg.manifest()));
  }

  /**
   * Four ops, counted by hand: {@code a = Square(x)} and {@code b = Neg(x)} at level 1 (a has
   * the lower id), {@code loss = Add(a, b)} at level 2, {@code train = NoOp(^loss)} at level 3;
   * the placeholder is resident. The chain a, b, loss, train needs 3 edges: b gets {@code ^a};
   * loss gets {@code ^b} although it reads b (only an existing control edge counts); train has
   * {@code ^loss} already. With {@code ^a} on b from the start, one edge is left to add.
   */
  @Test
  void addsOneControlEdgePerPairThatHasNoneYet() {
    for (boolean bAfterA : new boolean[] {false, true}) {
      GraphDef gd;
      try (Graph g = new Graph()) {
        Ops tf = Ops.create(g);
        Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
            Placeholder.shape(Shape.of(2)));
        Square<TFloat32> a = tf.withName("a").math.square(x);
        Ops tb = bAfterA ? tf.withControlDependencies(List.of(a)) : tf;
        Neg<TFloat32> b = tb.withName("b").math.neg(x);
        Add<TFloat32> loss = tf.withName("loss").math.add(a, b);
        tf.withName("train").withControlDependencies(List.of(loss)).noOp();
        gd = g.toGraphDef();
      }
      Manifest m = new Manifest(List.of(new Manifest.Feed("x", "float32", new long[] {2},
          "normal")), "loss:0", "train", null);
      SerialOrder.Result r = SerialOrder.enforce(gd, m);
      assertThat(r.reason()).isNull();
      assertThat(r.chained()).isEqualTo(4);
      assertThat(r.addedEdges()).as("b after a: " + bAfterA).isEqualTo(bAfterA ? 1 : 2);
      Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
      assertThat(after.get("b").getInputList()).containsExactly("x", "^a");
      assertThat(after.get("loss").getInputList()).containsExactly("a", "b", "^b");
      assertThat(after.get("train").getInputList()).containsExactly("^loss");
      assertThat(after.get("a").getInputList()).containsExactly("x");
    }
  }

  /**
   * Chained in an order given by name (the plan's simulated order), counted by hand: {@code b =
   * Neg(x)}, {@code c = Square(b)}, {@code a = Exp(x)}, {@code loss = Add(a, c)}, {@code train}.
   * Levelled, the chain is b, a (level 1), c (2), loss, train. Given b, a, loss, train (c not
   * named), the chain is b, c, a, loss, train: c follows its last input, b.
   */
  @Test
  void aGivenOrderIsChainedAsGivenAndAnOpItDoesNotNameFollowsItsLastInput() {
    GraphDef gd;
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(2)));
      Neg<TFloat32> b = tf.withName("b").math.neg(x);
      Square<TFloat32> c = tf.withName("c").math.square(b);
      var a = tf.withName("a").math.exp(x);
      Add<TFloat32> loss = tf.withName("loss").math.add(a, c);
      tf.withName("train").withControlDependencies(List.of(loss)).noOp();
      gd = g.toGraphDef();
    }
    Manifest m = new Manifest(List.of(new Manifest.Feed("x", "float32", new long[] {2},
        "normal")), "loss:0", "train", null);
    Map<String, NodeDef> levelled = TfTests.nodes(SerialOrder.enforce(gd, m).graphDef());
    assertThat(levelled.get("a").getInputList()).containsExactly("x", "^b");
    assertThat(levelled.get("c").getInputList()).containsExactly("b", "^a");
    SerialOrder.Result r = SerialOrder.enforce(gd, m, List.of("b", "a", "loss", "train"));
    assertThat(r.chained()).isEqualTo(5);
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    assertThat(after.get("b").getInputList()).containsExactly("x");
    assertThat(after.get("c").getInputList()).containsExactly("b", "^b");
    assertThat(after.get("a").getInputList()).containsExactly("x", "^c");
    assertThat(after.get("loss").getInputList()).containsExactly("a", "c", "^a");
  }

  /**
   * Init computations the model holds once because they are the same computation (two slots
   * filled with {@code ZerosLike(w)}, which {@code InitHeldConstants.folded} does not count) stay
   * out of init's chain: with a control edge each, TensorFlow would not merge them and would hold
   * two 4 KiB constants where the model holds one. Init's other ops (w's random initial value)
   * are still chained.
   */
  @Test
  void initTwinsTheModelMergesAreLeftOutOfInitsChain() {
    GraphDef gd;
    try (Graph g = new Graph()) {
      Ops tf = Ops.create(g);
      Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class,
          Placeholder.shape(Shape.of(4, 32)));
      var w = tf.withName("w").variable(Shape.of(32, 32), TFloat32.class);
      List<org.tensorflow.op.Op> inits = new ArrayList<>();
      Ops wi = tf.withSubScope("w_init");
      var initial = wi.math.mul(wi.random.truncatedNormal(wi.constant(new long[] {32, 32}),
          TFloat32.class), wi.constant(0.1f));
      inits.add(wi.assign(w, initial));
      for (String slot : List.of("s1", "s2")) {
        var s = tf.withName(slot).variable(Shape.of(32, 32), TFloat32.class);
        Ops si = tf.withSubScope(slot + "_init");
        inits.add(si.assign(s, si.zerosLike(w)));
      }
      tf.withName("init").withControlDependencies(inits).noOp();
      var loss = tf.withName("loss").math.mean(tf.linalg.matMul(x, w),
          tf.constant(new int[] {0, 1}));
      tf.withName("train").withControlDependencies(List.of(loss)).noOp();
      gd = g.toGraphDef();
      // the model holds one of the two: they are the same computation
      java.util.Set<String> step = GraphImporter.ancestors(gd, java.util.Set.of("loss",
          "train"));
      assertThat(InitHeldConstants.of(gd.getNodeList(), step, g::operation))
          .containsOnlyKeys("s1_init/ZerosLike");
      assertThat(InitHeldConstants.folded(gd.getNodeList()))
          .doesNotContain("s1_init/ZerosLike", "s2_init/ZerosLike");
      assertThat(InitHeldConstants.merged(gd.getNodeList(), step))
          .containsExactlyInAnyOrder("s1_init/ZerosLike", "s2_init/ZerosLike");
    }
    Manifest m = new Manifest(List.of(new Manifest.Feed("x", "float32", new long[] {4, 32},
        "normal")), "loss:0", "train", "init");
    SerialOrder.Result r = SerialOrder.enforce(gd, m);
    assertThat(r.reason()).isNull();
    assertThat(r.initChained()).isGreaterThan(1);
    Map<String, NodeDef> after = TfTests.nodes(r.graphDef());
    for (String twin : List.of("s1_init/ZerosLike", "s2_init/ZerosLike")) {
      assertThat(after.get(twin).getInputList()).as(twin).containsExactly("w");
    }
    // the random initial value is in the chain: some init op waits on another
    assertThat(r.graphDef().getNodeList()).anySatisfy(n -> {
      assertThat(n.getName()).startsWith("w_init/");
      assertThat(n.getInputList()).anyMatch(in -> in.startsWith("^"));
    });
  }

  private static int controlInputs(GraphDef gd) {
    int n = 0;
    for (NodeDef node : gd.getNodeList()) {
      n += (int) node.getInputList().stream().filter(in -> in.startsWith("^")).count();
    }
    return n;
  }

  /**
   * By default ({@code serialOrder(true)}), {@link Lms#rewrite(TrainingGraph)} hands back a
   * rewritten graph chained, the very graph {@link SerialOrder#enforce} makes of the unchained
   * one, planned as the unchained one is (the default memory ratio is 0.8 in both orders); with
   * {@code serialOrder(false)} it is not chained; a graph LMS leaves as given is never chained.
   */
  @Test
  void lmsChainsWhatItRewritesByDefaultAndNothingElse() {
    TrainingGraph tg = AdamNet.mlp(256, 64, 4);
    long peak = Lms.builder().budget(1L << 30).mode(LmsMode.REMAT).build().rewrite(tg)
        .predictedPeakBefore();
    Lms ordered = Lms.builder().budget(peak).mode(LmsMode.REMAT).build();
    assertThat(ordered.serialOrder()).isTrue();
    assertThat(ordered.budget().memRatio())
        .isEqualTo(dev.lms4j.core.plan.Budget.DEFAULT_MEM_RATIO);
    LmsResult chained = ordered.withBudget(new dev.lms4j.core.plan.Budget(peak,
        dev.lms4j.core.plan.Budget.DEFAULT_MEM_RATIO)).rewrite(tg);
    Lms unordered = Lms.builder().budget(peak).mode(LmsMode.REMAT).serialOrder(false).build();
    assertThat(unordered.budget().memRatio())
        .isEqualTo(dev.lms4j.core.plan.Budget.DEFAULT_MEM_RATIO);
    LmsResult plain = unordered.rewrite(tg);
    assertThat(plain.rewritten()).isTrue();
    assertThat(plain.graphDef()).isNotEqualTo(chained.graphDef());
    assertThat(chained.graphDef())
        .isEqualTo(SerialOrder.enforce(plain.graphDef(), tg.manifest()).graphDef());
    assertThat(chained.predictedPeakAfter()).isEqualTo(plain.predictedPeakAfter());
    LmsResult notNeeded = Lms.builder().budget(1L << 30).mode(LmsMode.AUTO).build().rewrite(tg);
    assertThat(notNeeded.rewritten()).isFalse();
    assertThat(notNeeded.graphDef()).isEqualTo(tg.graphDef());
  }

  @Test
  void aGraphWithControlFlowFramesIsLeftUnchained() {
    TrainingGraph tg = AdamNet.mlp(4, 8, 1);
    GraphDef gd = tg.graphDef().toBuilder().addNode(NodeDef.newBuilder().setName("loop/Enter")
        .setOp("Enter").addInput("loss")).build();
    SerialOrder.Result r = SerialOrder.enforce(gd, tg.manifest());
    assertThat(r.graphDef()).isSameAs(gd);
    assertThat(r.addedEdges()).isZero();
    assertThat(r.reason()).contains("control flow");
  }
}
