package dev.lms4j.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.SyntheticGraphs;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.memory.MemorySimulator;
import dev.lms4j.core.schedule.AddNChains;
import dev.lms4j.core.schedule.DfsScheduler;
import dev.lms4j.core.graph.Levels;
import dev.lms4j.core.schedule.ListScheduler;
import dev.lms4j.core.schedule.PostOrderScheduler;
import dev.lms4j.core.schedule.ScheduleEdges;
import dev.lms4j.core.schedule.ScheduleEdges.Edge;
import dev.lms4j.core.schedule.Schedulers;
import dev.lms4j.core.schedule.Schedulers.Kind;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class SchedulersTest {
  private static final long KB = 1024;

  private static DataflowGraphBuilder feed() {
    return DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(KB));
  }

  private static List<String> names(DataflowGraph g, int[] order) {
    return Arrays.stream(order).mapToObj(v -> g.op(v).name()).toList();
  }

  private static long peak(DataflowGraph g, int[] order) {
    return MemorySimulator.simulate(g, order).peakBytes();
  }

  /** The simulated peak TensorFlow reaches on {@code g} plus {@code edges}, in lms4j's model. */
  private static long levelledPeakWith(DataflowGraph g, List<Edge> edges) {
    DataflowGraph ordered = ScheduleEdges.apply(g, edges);
    return peak(ordered, Levels.of(ordered).schedule());
  }

  /**
   * Two branches from the feed x (1 KB, resident): a1 (8 KB) -> a2 (1 KB) and b1 (8 KB) -> b2
   * (1 KB); c = Add(a2, b2) (1 KB).
   *
   * <pre>
   * levelled  x a1 b1 a2 b2 c   a1: 1+8 = 9, b1: 9+8 = 17, a2: 17+1 = 18 (then a1 freed: 10),
   *                             b2: 11 (b1 freed: 3), c: 4                      -> peak 18 KB
   * list      x a1 a2 b1 b2 c   a1: 9, a2: 10 (a1 freed: 2), b1: 10, b2: 11 (b1 freed: 3),
   *                             c: 4                                            -> peak 11 KB
   * </pre>
   *
   * After x, a1 and b1 both allocate 8 KB (tie: a1 comes first in the levelled order); then a2
   * frees a1 (+8 - 1 = +7) and beats b1 (-8). The post-order (c's inputs a2 then b2) and the DFS
   * (a2 and b2 tie on extra users and subtree sizes, 9 KB each: by name) give the same order.
   */
  @Test
  void listSchedulerFinishesOneBranchBeforeStartingTheOther() {
    DataflowGraph g = feed()
        .op("a1", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KB))
        .op("a2", "Relu", OpCategory.FORWARD, List.of("a1"), Tensor.ofBytes(KB))
        .op("b1", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KB))
        .op("b2", "Relu", OpCategory.FORWARD, List.of("b1"), Tensor.ofBytes(KB))
        .op("c", "AddV2", OpCategory.FORWARD, List.of("a2", "b2"), Tensor.ofBytes(KB))
        .build();
    int[] levelled = Levels.of(g).schedule();
    assertThat(names(g, levelled)).containsExactly("x", "a1", "b1", "a2", "b2", "c");
    assertThat(MemorySimulator.simulate(g, levelled).timeline())
        .containsExactly(KB, 9 * KB, 17 * KB, 18 * KB, 11 * KB, 4 * KB);
    List<String> branchByBranch = List.of("x", "a1", "a2", "b1", "b2", "c");
    assertThat(names(g, ListScheduler.schedule(g))).isEqualTo(branchByBranch);
    assertThat(names(g, PostOrderScheduler.schedule(g))).isEqualTo(branchByBranch);
    assertThat(names(g, DfsScheduler.schedule(g))).isEqualTo(branchByBranch);

    Schedulers.Choice c = Schedulers.best(g);
    assertThat(c.peaks()).containsExactly(Map.entry(Kind.LEVELS, 18 * KB),
        Map.entry(Kind.LIST, 11 * KB), Map.entry(Kind.DFS, 11 * KB),
        Map.entry(Kind.POST_ORDER, 11 * KB));
    assertThat(c.kind()).isEqualTo(Kind.LIST); // the first of the three that tie
    assertThat(c.peakBytes()).isEqualTo(11 * KB);

    // b1 does not depend on a2 and sits a level below it: one edge, in either mode
    List<Edge> edges = ScheduleEdges.of(g, c.order());
    assertThat(edges).containsExactly(new Edge("a2", "b1"));
    assertThat(ScheduleEdges.of(g, c.order(), ScheduleEdges.Mode.LEVELLED)).isEqualTo(edges);
    DataflowGraph ordered = ScheduleEdges.apply(g, edges);
    assertThat(names(ordered, Levels.of(ordered).schedule())).isEqualTo(branchByBranch);
    assertThat(levelledPeakWith(g, edges)).isEqualTo(11 * KB);
  }

  /**
   * As above, but the a-branch is light: a1 is 2 KB, b1 8 KB, a2 = b2 = c = 1 KB.
   *
   * <pre>
   * levelled   x a1 b1 a2 b2 c   a1: 3, b1: 11, a2: 12 (a1 freed: 10), b2: 11, c: 4  -> 12 KB
   * post-order x a1 a2 b1 b2 c   a1: 3, a2: 4 (a1 freed: 2), b1: 10, b2: 11, c: 4   -> 11 KB
   * DFS        x b1 b2 a1 a2 c   b1: 9, b2: 10 (b1 freed: 2), a1: 4, a2: 5, c: 4    -> 10 KB
   * </pre>
   *
   * DFS visits c's heavier input first: b2's subtree holds 8 + 1 = 9 KB, a2's 2 + 1 = 3 KB (both
   * have one extra user, x's second reader). The list scheduler starts with a1 (-2 KB beats
   * -8 KB) and ends like the post-order.
   */
  @Test
  void dfsVisitsTheHeavierSubtreeFirst() {
    DataflowGraph g = feed()
        .op("a1", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(2 * KB))
        .op("a2", "Relu", OpCategory.FORWARD, List.of("a1"), Tensor.ofBytes(KB))
        .op("b1", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(8 * KB))
        .op("b2", "Relu", OpCategory.FORWARD, List.of("b1"), Tensor.ofBytes(KB))
        .op("c", "AddV2", OpCategory.FORWARD, List.of("a2", "b2"), Tensor.ofBytes(KB))
        .build();
    assertThat(names(g, PostOrderScheduler.schedule(g)))
        .containsExactly("x", "a1", "a2", "b1", "b2", "c");
    assertThat(names(g, DfsScheduler.schedule(g)))
        .containsExactly("x", "b1", "b2", "a1", "a2", "c");
    Schedulers.Choice c = Schedulers.best(g);
    assertThat(c.peaks().get(Kind.LEVELS)).isEqualTo(12 * KB);
    assertThat(c.peaks().get(Kind.LIST)).isEqualTo(11 * KB);
    assertThat(c.peaks().get(Kind.POST_ORDER)).isEqualTo(11 * KB);
    assertThat(c.kind()).isEqualTo(Kind.DFS);
    assertThat(c.peakBytes()).isEqualTo(10 * KB);
    assertThat(MemorySimulator.simulate(g, c.order()).timeline())
        .containsExactly(KB, 9 * KB, 10 * KB, 4 * KB, 5 * KB, 4 * KB);
    // a1 could start as soon as x is there: it must wait for b2
    List<Edge> edges = ScheduleEdges.of(g, c.order());
    assertThat(edges).containsExactly(new Edge("b2", "a1"));
    assertThat(levelledPeakWith(g, edges)).isEqualTo(10 * KB);
  }

  /**
   * A two-layer training chain ({@link SyntheticGraphs#trainingChain}: activations and gradients
   * 4 KB, weights 1 KB). Resident: x (4 KB feed) + w1 + w2 = 6 KB. In the levelled order:
   *
   * <pre>
   * f1 10, f2 14, loss 14 + 4 B (f2 freed: 10), g3 14 (loss freed), g2 18,
   * dw2 19 (g3, f1 freed: 11), apply2 11 (dw2 freed: 10), g1 14 (unread: 10),
   * dw1 11 (g2 freed: 7), apply1 7                                          -> peak 19 KB
   * </pre>
   *
   * The list scheduler would run dw2 (-1 KB) before g2 (-4 KB), then apply2 to free dw2, and
   * peak at 18 KB. But g2 reads w2 and apply2 updates it: TensorFlow runs g2 first, so every
   * scheduler keeps apply2 after g2, and then dw2 stays alive while g2 runs: 19 KB. Nothing beats
   * the levelled order, so it is chosen and no edge is needed.
   */
  @Test
  void levelledOrderIsKeptWhenNothingBeatsItAndVariableUpdatesStayAfterTheirReads() {
    DataflowGraph g = SyntheticGraphs.trainingChain(2, 4 * KB, KB);
    int[] levelled = Levels.of(g).schedule();
    assertThat(peak(g, levelled)).isEqualTo(19 * KB);
    Schedulers.Choice c = Schedulers.best(g);
    assertThat(c.kind()).isEqualTo(Kind.LEVELS);
    assertThat(c.order()).isEqualTo(levelled);
    assertThat(c.peakBytes()).isEqualTo(19 * KB);
    assertThat(c.peaks().get(Kind.LIST)).isEqualTo(19 * KB);
    for (Kind k : Kind.values()) {
      List<String> order = names(g, Schedulers.schedule(g, k));
      assertThat(order.indexOf("train/apply2")).as(k.name())
          .isGreaterThan(order.indexOf("gradients/g2"));
      assertThat(order.indexOf("train/apply1")).as(k.name())
          .isGreaterThan(order.indexOf("gradients/g1"));
    }
    assertThat(ScheduleEdges.of(g, levelled, ScheduleEdges.Mode.LEVELLED)).isEmpty();
    // a schedule that updates w2 before g2 reads it is refused
    List<String> ln = names(g, levelled);
    int[] racy = levelled.clone();
    int g2 = ln.indexOf("gradients/g2");
    int apply2 = ln.indexOf("train/apply2");
    int dw2 = ln.indexOf("gradients/dw2");
    // levelled: ... g2, dw2, apply2 ...  ->  ... dw2, apply2, g2 ...
    assertThat(List.of(g2, dw2, apply2)).isEqualTo(List.of(g2, g2 + 1, g2 + 2));
    racy[g2] = levelled[dw2];
    racy[g2 + 1] = levelled[apply2];
    racy[g2 + 2] = levelled[g2];
    assertThat(peak(g, racy)).isEqualTo(18 * KB);
    assertThatThrownBy(() -> ScheduleEdges.of(g, racy))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("train/apply2").hasMessageContaining("one variable");
  }

  /** A chain needs no edge: every op already waits for the one before it. */
  @Test
  void chainNeedsNoEdgesInEitherMode() {
    DataflowGraph g = feed()
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(2 * KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(2 * KB))
        .op("c", "Relu", OpCategory.FORWARD, List.of("b"), Tensor.ofBytes(2 * KB))
        .build();
    for (Kind k : Kind.values()) {
      assertThat(names(g, Schedulers.schedule(g, k))).containsExactly("x", "a", "b", "c");
    }
    for (ScheduleEdges.Mode m : ScheduleEdges.Mode.values()) {
      assertThat(ScheduleEdges.of(g, Levels.of(g).schedule(), m)).isEmpty();
    }
  }

  /**
   * Strict mode orders every pair of consecutive memory-relevant ops that no path orders;
   * resident ops (the feed, the variable) and ops that only read resident tensors and allocate
   * nothing (the update) stay free. Levelled mode adds nothing for the levelled order.
   */
  @Test
  void strictModeOrdersOnlyMemoryRelevantOps() {
    DataflowGraph g = feed()
        .op("w", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(KB))
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(2 * KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(2 * KB))
        .op("c", "AddV2", OpCategory.FORWARD, List.of("a", "b"), Tensor.ofBytes(2 * KB))
        .op("u", "AssignAdd", OpCategory.OPTIMIZER, List.of("w", "x"), Tensor.persistent(KB))
        .build();
    int[] levelled = Levels.of(g).schedule();
    assertThat(names(g, levelled)).containsExactly("x", "w", "a", "b", "u", "c");
    assertThat(ScheduleEdges.of(g, levelled, ScheduleEdges.Mode.LEVELLED)).isEmpty();
    assertThat(ScheduleEdges.of(g, levelled)).containsExactly(new Edge("a", "b"));
  }

  /**
   * Every scheduler's order, enforced by the edges of either mode, gives the same simulated peak
   * as the levelled schedule of the graph with the edges (lms4j's model of TensorFlow's order).
   */
  @Test
  void edgesReproduceEveryScheduleOnTrainingChains() {
    for (DataflowGraph g : List.of(SyntheticGraphs.trainingChain(3, 4 * KB, KB),
        SyntheticGraphs.trainingChain(40, 64 * KB, 16 * KB))) {
      for (Kind k : Kind.values()) {
        int[] order = Schedulers.schedule(g, k);
        for (ScheduleEdges.Mode m : ScheduleEdges.Mode.values()) {
          List<Edge> edges = ScheduleEdges.of(g, order, m);
          assertThat(levelledPeakWith(g, edges)).as(k + " " + m).isEqualTo(peak(g, order));
          assertThat(edges).doesNotHaveDuplicates();
        }
      }
    }
  }

  /**
   * Same graph, same answer: the schedules, the choice and the edges do not depend on hash order
   * or on earlier runs. 2000 layers are 10,004 ops and 20,002 edges (planning time is measured
   * by hand, not asserted).
   */
  @Test
  void outputIsDeterministic() {
    DataflowGraph g = SyntheticGraphs.trainingChain(2000, 64 * KB, 16 * KB);
    assertThat(g.size()).isEqualTo(10_004);
    Schedulers.Choice first = Schedulers.best(g);
    Schedulers.Choice again = Schedulers.best(SyntheticGraphs.trainingChain(2000, 64 * KB,
        16 * KB));
    assertThat(again.order()).isEqualTo(first.order());
    assertThat(again.peaks()).isEqualTo(first.peaks());
    for (Kind k : Kind.values()) {
      assertThat(Schedulers.schedule(g, k)).isEqualTo(Schedulers.schedule(g, k));
    }
    int[] list = Schedulers.schedule(g, Kind.LIST);
    assertThat(ScheduleEdges.of(g, list)).isEqualTo(ScheduleEdges.of(g, list));
  }

  /**
   * An AddN keeps its inputs alive until the last one arrives. x (feed, 1 KB); f1..f4 a chain
   * of 4 KB activations (fi reads f(i-1)); gi = Neg(fi), 2 KB each; s = AddN(g3, g1, g4, g2).
   *
   * <pre>
   * AddN, any order: when f4 is computed, f3 (its input), f4, g1 and g2 are alive, and g3 either
   * is already or will be while f3 still is: 1 + 4 + 4 + 2 + 2 + 2       -> peak 15 KB at best
   *   levelled: f1 5, g1 7, f2 11 (f1 freed: 7), g2 9, f3 13 (9), g3 11, f4 15, g4 13 (9), s 11
   *   (the post-orders start from g4 or g3 and keep f1, f2 alive: 19 and 17 KB)
   * chain (g1+g2, then +g3, then +g4), list schedule:
   *   f1 5, g1 7, f2 11 (7), g2 9, add_1 11 (g1, g2 freed: 7), f3 11 (f2 freed: 7), g3 9,
   *   add_2 11 (7), f4 11 (f3 freed: 7), g4 9 (f4 freed: 5), s 7 (3)        -> peak 11 KB
   * </pre>
   *
   * The chain alone changes nothing in the levelled order (add_1 sits at level 4 with f4, after
   * it by id: 15 KB); it takes a scheduler that runs each add as soon as it can.
   */
  @Test
  void addNChainFreesEachInputOnceAdded() {
    DataflowGraphBuilder b = feed();
    String prev = "x";
    for (int i = 1; i <= 4; i++) {
      b.op("f" + i, "Relu", OpCategory.FORWARD, List.of(prev), Tensor.ofBytes(4 * KB));
      b.op("g" + i, "Neg", OpCategory.FORWARD, List.of("f" + i), Tensor.ofBytes(2 * KB));
      prev = "f" + i;
    }
    DataflowGraph g = b.op("s", "AddN", OpCategory.FORWARD, List.of("g3", "g1", "g4", "g2"),
        Tensor.ofBytes(2 * KB)).build();
    Schedulers.Choice before = Schedulers.best(g);
    assertThat(before.kind()).isEqualTo(Kind.LEVELS);
    assertThat(before.peakBytes()).isEqualTo(15 * KB);
    assertThat(before.peaks()).containsEntry(Kind.LIST, 15 * KB)
        .containsEntry(Kind.DFS, 19 * KB).containsEntry(Kind.POST_ORDER, 17 * KB);

    List<AddNChains.Chain> chains = AddNChains.plan(g, Levels.of(g).schedule());
    assertThat(chains).containsExactly(new AddNChains.Chain("s",
        List.of("g1:0", "g2:0", "g3:0", "g4:0")));
    assertThat(chains.get(0).adds()).containsExactly("lms4j/addn/s/add_1", "lms4j/addn/s/add_2",
        "s");
    DataflowGraph chained = AddNChains.apply(g, chains);
    assertThat(chained.opOrThrow("s").type()).isEqualTo("AddV2");
    assertThat(chained.opOrThrow("s").inputs().stream().map(chained::tensorName))
        .containsExactly("lms4j/addn/s/add_2:0", "g4:0");
    assertThat(chained.opOrThrow("lms4j/addn/s/add_1").inputs().stream()
        .map(chained::tensorName)).containsExactly("g1:0", "g2:0");

    Schedulers.Choice after = Schedulers.best(chained);
    assertThat(after.peaks().get(Kind.LEVELS)).isEqualTo(15 * KB);
    assertThat(after.kind()).isEqualTo(Kind.LIST);
    assertThat(after.peakBytes()).isEqualTo(11 * KB);
    assertThat(names(chained, after.order())).containsExactly("x", "f1", "g1", "f2", "g2",
        "lms4j/addn/s/add_1", "f3", "g3", "lms4j/addn/s/add_2", "f4", "g4", "s");
    assertThat(levelledPeakWith(chained, ScheduleEdges.of(chained, after.order())))
        .isEqualTo(11 * KB);
  }

  @Test
  void addNWithTwoInputsIsLeftAlone() {
    DataflowGraph g = feed()
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(KB))
        .op("s", "AddN", OpCategory.FORWARD, List.of("a", "x"), Tensor.ofBytes(KB))
        .build();
    assertThat(AddNChains.plan(g, Levels.of(g).schedule())).isEmpty();
  }

  @Test
  void badInputIsRefused() {
    DataflowGraph g = feed()
        .op("a", "Relu", OpCategory.FORWARD, List.of("x"), Tensor.ofBytes(KB))
        .op("b", "Relu", OpCategory.FORWARD, List.of("a"), Tensor.ofBytes(KB))
        .build();
    assertThatThrownBy(() -> ScheduleEdges.of(g, new int[] {0, 2, 1}))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("runs b before a");
    assertThatThrownBy(() -> ScheduleEdges.of(g, new int[] {0, 1}))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("2 ops, graph 3");
    assertThatThrownBy(() -> ScheduleEdges.apply(g, List.of(new Edge("b", "a"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("cycle");
    assertThatThrownBy(() -> ScheduleEdges.apply(g, List.of(new Edge("a", "nope"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("nope");
    assertThatThrownBy(() -> new Edge("a", "a")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> AddNChains.apply(g, List.of(new AddNChains.Chain("b",
        List.of("x:0", "a:0", "x:0"))))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not the op's inputs");
  }
}
