package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.data.Percentage.withPercentage;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.StepLoop;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.GraphOptions;
import org.tensorflow.proto.RewriterConfig;

/**
 * Why {@code auto}'s plan for the corpus encoder moves its second loss by about 1e-7: grappler's
 * arithmetic optimizer, not the plan. The tanh-GELU computes {@code Mul_7 = x * x}, then {@code
 * Mul_8 = Mul_7 * 0.044715}; the plan recomputes {@code Mul_7} for the backward pass. In the
 * unmodified graph {@code Mul_7} has two readers, so grappler keeps the product and turns it
 * into {@code Square(x)}; in the rewritten graph the original {@code Mul_7} has one reader left,
 * grappler takes it into a tree of products and reassociates it as {@code x * (x * 0.044715)},
 * which rounds differently (the second loss moved by 1e-7 relative where TensorFlow's Eigen
 * kernels run; where oneDNN runs, AVX-512 VNNI/BF16, it stayed bit-identical). With arithmetic
 * optimization off both graphs reach the same losses, bit for bit. (Tried and not enough to keep grappler off the original: a control edge from it
 * to its clone; the stage's "already rewritten" tag on it.)
 */
class RecomputeRoundingTest {
  private static ConfigProto config(boolean arithmetic) {
    RewriterConfig.Builder rw = RewriterConfig.newBuilder()
        .setDependencyOptimization(RewriterConfig.Toggle.OFF);
    if (!arithmetic) {
      rw.setArithmeticOptimization(RewriterConfig.Toggle.OFF);
    }
    return ConfigProto.newBuilder().setInterOpParallelismThreads(-1)
        .setGraphOptions(GraphOptions.newBuilder().setRewriteOptions(rw)).build();
  }

  private static List<Double> losses(TrainingGraph tg, GraphDef gd, boolean arithmetic) {
    List<Double> out = new ArrayList<>();
    StepLoop.run(gd, tg.manifest(), config(arithmetic), 3, 42, rec -> out.add(rec.loss()));
    return out;
  }

  /** auto's simulated peak without a budget (after the rewrites before planning). */
  private static long unbudgetedPeak(TrainingGraph tg, Map<String, Long> noScratch) {
    return Lms.builder().budget(1L << 40).mode(LmsMode.AUTO).scratch(noScratch).build()
        .rewrite(tg).predictedPeakAfter();
  }

  /** The graph TensorFlow ran after grappler: node name to "Op [inputs]". */
  private static Map<String, String> optimized(TrainingGraph tg, GraphDef gd) {
    Map<String, String> out = new TreeMap<>();
    PartitionGraphs.of(tg, gd, config(true)).forEach((name, n) ->
        out.put(name, n.getOp() + " " + n.getInputList()));
    return out;
  }

  @Test
  void grapplerReassociatesAProductWhoseRecomputedFactorLostItsSecondReader() {
    TrainingGraph tg = Corpus.Family.ENCODER.build(Corpus.Size.TEST, 42);
    // the plan as written, unchained: what grappler makes of it, without the chain's edges
    LmsResult lr = Lms.builder().budget(13L << 20).mode(LmsMode.AUTO).serialOrder(false).build()
        .rewrite(tg);
    assertThat(lr.memoryPlan().recompute().groups())
        .anySatisfy(gr -> assertThat(gr.ops()).containsExactly("Mul_7"));
    // arithmetic optimization off: the plan changes nothing in the math
    assertThat(losses(tg, lr.graphDef(), false))
        .containsExactlyElementsOf(losses(tg, tg.graphDef(), false));
    // on (TensorFlow's default): the second loss may move, by rounding only. It moved (1e-7
    // relative) on an EPYC without AVX-512, where TensorFlow's Eigen kernels run; on an EPYC
    // with AVX-512 VNNI/BF16 (oneDNN on) the losses stayed bit-identical
    List<Double> ref = losses(tg, tg.graphDef(), true);
    List<Double> lms = losses(tg, lr.graphDef(), true);
    assertThat(lms.get(0)).isEqualTo(ref.get(0));
    assertThat(lms.get(1)).isCloseTo(ref.get(1), withPercentage(1e-4));
    // because grappler rewrote the two forward passes differently
    Map<String, String> before = optimized(tg, tg.graphDef());
    Map<String, String> after = optimized(tg, lr.graphDef());
    assertThat(before.get("ArithmeticOptimizer/ReplaceMulWithSquare_Mul_7"))
        .isEqualTo("Square [BiasAdd_2]");
    assertThat(before.get("Mul_8"))
        .isEqualTo("Mul [ArithmeticOptimizer/ReplaceMulWithSquare_Mul_7, Const_35]");
    assertThat(after).doesNotContainKey("ArithmeticOptimizer/ReplaceMulWithSquare_Mul_7");
    assertThat(after.get("Mul_7")).isEqualTo("Mul [BiasAdd_2, Const_35]");
    assertThat(after.get("Mul_8")).isEqualTo("Mul [BiasAdd_2, Mul_7]");
  }
  /**
   * The same on the einsum encoder (its tanh-GELU is the encoder's): auto's plan at the
   * unbudgeted peak recomputes the GELU's products; with arithmetic optimization off the
   * unchained plan's losses are the unmodified graph's bit for bit, with it on (TensorFlow's
   * default) the second moved by 1e-7 relative on an EPYC (AVX-512, oneDNN on).
   */
  @Test
  void theEinsumEncodersGeluIsReassociatedTheSameWay() {
    TrainingGraph tg = Corpus.Family.ENCODER_EINSUM.build(Corpus.Size.TEST, 42);
    Map<String, Long> noScratch = dev.lms4j.train.BudgetedRuns.noScratch(tg);
    long peak = unbudgetedPeak(tg, noScratch);
    // auto's own plan, as planned: at this budget none of auto's plans leaves the allocator
    // check's headroom, and the check takes tflms's re-plan, which does (it recomputes nothing)
    LmsResult lr = Lms.builder().budget(peak).mode(LmsMode.AUTO).scratch(noScratch)
        .allocatorCheck(false).build().rewrite(tg);
    assertThat(lr.memoryPlan().recompute().groups())
        .anySatisfy(gr -> assertThat(gr.ops()).contains("Mul_7"));
    // the plan as written, unchained (as for the encoder above): with arithmetic optimization
    // off it changes nothing in the math. (Chained, on an Intel Xeon with AVX-512 FP16 the
    // third loss moved by 2e-7 with arithmetic optimization off, 4.636747360229492 against
    // 4.636748313903809, where the unchained plan's stayed: the chain, not the recompute; with
    // TensorFlow's default, below, the losses stay within rounding either way.)
    LmsResult unchained = Lms.builder().budget(peak).mode(LmsMode.AUTO).scratch(noScratch)
        .allocatorCheck(false).serialOrder(false).build().rewrite(tg);
    assertThat(unchained.memoryPlan().recompute().groups())
        .anySatisfy(gr -> assertThat(gr.ops()).contains("Mul_7"));
    assertThat(losses(tg, unchained.graphDef(), false))
        .containsExactlyElementsOf(losses(tg, tg.graphDef(), false));
    List<Double> ref = losses(tg, tg.graphDef(), true);
    List<Double> lms = losses(tg, lr.graphDef(), true);
    for (int i = 0; i < ref.size(); i++) {
      assertThat(lms.get(i)).isCloseTo(ref.get(i), withPercentage(1e-4));
    }
  }

  /**
   * The mixed-precision MLP: where a plan recomputes a layer's float16 bias add and ReLU for the
   * backward pass ({@code remat} at 0.9 of the simulated peak, with its slots on the host, the
   * first budget at which it plans), the losses move by about 1e-4 relative (measured on an
   * Intel Xeon with AVX-512 FP16, oneDNN on: 2.949031352996826 became 2.949286937713623). The
   * reason is a kernel TensorFlow chooses: as given, grappler's remapper fuses
   * {@code MatMul + BiasAdd} into one oneDNN kernel that adds the bias to the float32 accumulator
   * and rounds to float16 once; with the clone the MatMul's output has two readers, is not fused,
   * and is rounded to float16 before the bias is added. Where TensorFlow does not fuse them in
   * the graph as given either (a CPU without AVX-512 FP16), the losses are bit-identical. The
   * slots on the host alone change nothing.
   */
  @Test
  void theMixedMlpsRecomputedBiasAddKeepsItsMatMulUnfused() {
    TrainingGraph tg = Corpus.Family.MLP_MIXED.build(Corpus.Size.TEST, 42);
    Map<String, Long> noScratch = dev.lms4j.train.BudgetedRuns.noScratch(tg);
    long peak = unbudgetedPeak(tg, noScratch);
    LmsResult lr = Lms.builder().budget((long) (peak * 0.9)).mode(LmsMode.REMAT)
        .scratch(noScratch).build().rewrite(tg);
    assertThat(lr.memoryPlan().recompute().groups())
        .anySatisfy(gr -> assertThat(gr.ops()).contains("BiasAdd"));
    Map<String, String> before = optimized(tg, tg.graphDef());
    Map<String, String> after = optimized(tg, lr.graphDef());
    assertThat(after.get("BiasAdd")).startsWith("BiasAdd [MatMul");
    List<Double> ref = losses(tg, tg.graphDef(), true);
    List<Double> lms = losses(tg, lr.graphDef(), true);
    if (before.get("BiasAdd").contains("FusedMatMul")) {
      // oneDNN fuses the float16 MatMul and bias add of the graph as given (on a CPU with
      // AVX-512 FP16): the first loss, before any update, is the same; the later ones move
      assertThat(lms.get(0)).isEqualTo(ref.get(0));
      for (int i = 0; i < ref.size(); i++) {
        assertThat(lms.get(i)).isCloseTo(ref.get(i), withPercentage(0.05));
      }
    } else {
      // where TensorFlow does not fuse them as given (measured 2026-12-06 on an Intel Xeon with
      // AVX-512 but not its FP16 extension: "BiasAdd [MatMul, fc0_half/Cast_1]"), both graphs run
      // the same kernels and the losses are the same bits
      assertThat(before.get("BiasAdd")).startsWith("BiasAdd [MatMul");
      assertThat(lms).containsExactlyElementsOf(ref);
    }
    // the slots on the host alone: the same bits
    dev.lms4j.tf.SlotOffload.Result offloaded = dev.lms4j.tf.SlotOffload.rewrite(tg.graphDef(),
        tg.manifest().runOps(), dev.lms4j.tf.SlotOffload.DEFAULT_MIN_BYTES);
    assertThat(offloaded.changed()).isTrue();
    assertThat(losses(tg, offloaded.graphDef(), true)).containsExactlyElementsOf(ref);
  }
}
