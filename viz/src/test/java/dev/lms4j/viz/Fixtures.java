package dev.lms4j.viz;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.DataflowGraphBuilder;
import dev.lms4j.core.graph.OpCategory;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.RecomputePlanner;
import dev.lms4j.core.plan.SwapAutoTuner;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import java.util.ArrayList;
import java.util.List;

/** Graphs and plans for the viz tests, planned the way Lms's auto strategy plans. */
final class Fixtures {
  static final long MIB = 1 << 20;

  private Fixtures() {}

  /**
   * A training chain of {@code layers} layers, each a MatMul then a BiasAdd (cheap to
   * recompute) then a Relu, with activations of 2, 3 or 4 MiB (layer i: {@code 2 + i % 3}
   * MiB); backward ops read the MatMul input and the Relu input as TF's gradients do.
   */
  static DataflowGraph mlp(int layers) {
    DataflowGraphBuilder b = DataflowGraph.builder();
    Tensor w = Tensor.persistent(MIB);
    b.op("x", "Placeholder", OpCategory.FORWARD, List.of(), act(4));
    String prev = "x";
    for (int i = 1; i <= layers; i++) {
      Tensor act = act(2 + i % 3);
      b.op("w" + i, "VariableV2", OpCategory.FORWARD, List.of(), w);
      b.op("dense" + i + "/MatMul", "MatMul", OpCategory.FORWARD, List.of(prev, "w" + i), act);
      b.op("dense" + i + "/BiasAdd", "BiasAdd", OpCategory.FORWARD,
          List.of("dense" + i + "/MatMul"), act);
      b.op("dense" + i + "/Relu", "Relu", OpCategory.FORWARD, List.of("dense" + i + "/BiasAdd"),
          act);
      prev = "dense" + i + "/Relu";
    }
    b.op("loss", "Mean", OpCategory.FORWARD, List.of(prev), Tensor.ofBytes(4));
    b.op("gradients/Fill", "Fill", OpCategory.BACKWARD, List.of("loss"), act(2 + layers % 3));
    String grad = "gradients/Fill";
    List<String> applies = new ArrayList<>();
    for (int i = layers; i >= 1; i--) {
      String input = i == 1 ? "x" : "dense" + (i - 1) + "/Relu";
      Tensor act = act(2 + i % 3);
      b.op("gradients/ReluGrad_" + i, "ReluGrad", OpCategory.BACKWARD,
          List.of(grad, "dense" + i + "/BiasAdd"), act);
      b.op("gradients/MatMul_" + i, "MatMul", OpCategory.BACKWARD,
          List.of("gradients/ReluGrad_" + i, "w" + i), act);
      b.op("gradients/MatMul_1_" + i, "MatMul", OpCategory.BACKWARD,
          List.of(input, "gradients/ReluGrad_" + i), Tensor.ofBytes(MIB));
      b.op("train/apply" + i, "ApplyGradientDescent", OpCategory.OPTIMIZER,
          List.of("w" + i, "gradients/MatMul_1_" + i), Tensor.persistent(MIB));
      applies.add("^train/apply" + i);
      grad = "gradients/MatMul_" + i;
    }
    b.op("train_op", "NoOp", OpCategory.OPTIMIZER, "", applies, List.of());
    return b.build();
  }

  /**
   * Grappler's case of many gradients summed by one AddN: an activation {@code a} feeds
   * {@code k} MatMul branches summed by an AddN; their k gradients are summed by another AddN.
   * Levelled, all k gradients are live before it runs (k = 8: 46 KiB at the peak); a scheduling
   * step chains the AddNs so that each is added as it arrives (26 KiB).
   */
  static DataflowGraph branches(int k) {
    long kib = 1024;
    DataflowGraphBuilder b = DataflowGraph.builder()
        .op("x", "Placeholder", OpCategory.FORWARD, List.of(), Tensor.ofBytes(kib))
        .op("w0", "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(kib))
        .op("a", "MatMul", OpCategory.FORWARD, List.of("x", "w0"), Tensor.ofBytes(4 * kib));
    List<String> bs = new ArrayList<>();
    List<String> gbs = new ArrayList<>();
    for (int i = 1; i <= k; i++) {
      b.op("w" + i, "VariableV2", OpCategory.FORWARD, List.of(), Tensor.persistent(kib));
      b.op("b" + i, "MatMul", OpCategory.FORWARD, List.of("a", "w" + i), Tensor.ofBytes(4 * kib));
      bs.add("b" + i);
    }
    b.op("s", "AddN", OpCategory.FORWARD, bs, Tensor.ofBytes(4 * kib));
    b.op("loss", "Mean", OpCategory.FORWARD, List.of("s"), Tensor.ofBytes(4));
    b.op("gradients/gs", "Fill", OpCategory.BACKWARD, List.of("loss"), Tensor.ofBytes(4 * kib));
    for (int i = 1; i <= k; i++) {
      b.op("gradients/gb" + i, "MatMul", OpCategory.BACKWARD, List.of("gradients/gs", "w" + i),
          Tensor.ofBytes(4 * kib));
      gbs.add("gradients/gb" + i);
    }
    b.op("gradients/ga", "AddN", OpCategory.BACKWARD, gbs, Tensor.ofBytes(4 * kib));
    b.op("gradients/dw0", "MatMul", OpCategory.BACKWARD, List.of("gradients/ga", "x"),
        Tensor.ofBytes(kib));
    b.op("train/apply0", "ApplyGradientDescent", OpCategory.OPTIMIZER,
        List.of("w0", "gradients/dw0"), Tensor.persistent(kib));
    return b.build();
  }

  private static Tensor act(int mib) {
    return new Tensor("float32", new long[] {256L * mib, 1024}, mib * MIB, false);
  }

  /** A plan as Lms's auto strategy makes it: recompute the best groups, swap the rest. */
  record Planned(DataflowGraph model, SwapPlan swap, RecomputePlan recompute, long budget,
      long predictedPeak) {}

  static Planned auto(DataflowGraph model, long budget) {
    RecomputePlanner.Result rr = RecomputePlanner.bestEffort(model, budget, 0.8);
    DataflowGraph model2 = RecomputeApplier.apply(model, rr.plan());
    SwapAutoTuner.Result t = SwapAutoTuner.tune(model2,
        SwapParams.defaults(), budget, 0.8);
    return new Planned(model, t.plan(), rr.plan(), budget, t.predictedPeak());
  }
}
