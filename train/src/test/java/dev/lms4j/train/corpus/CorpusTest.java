package dev.lms4j.train.corpus;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.tf.GraphImporter;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.StepLoop;
import dev.lms4j.tf.run.StepRecord;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.NodeDef;

/**
 * Every corpus family builds (identically twice), imports into lms4j's graph model, holds the op
 * types that make it what it is, and trains a few unbudgeted steps with finite, sane losses that
 * are bit-identical between two runs (ops in the caller's thread).
 */
class CorpusTest {
  private static final int STEPS = 4;

  @ParameterizedTest
  @EnumSource(Corpus.Family.class)
  void buildsImportsAndTrainsDeterministically(Corpus.Family family) {
    TrainingGraph tg = family.build(Corpus.Size.SMALL, 7);
    assertThat(family.build(Corpus.Size.SMALL, 7).graphDef()).isEqualTo(tg.graphDef());

    Set<String> types = tg.graphDef().getNodeList().stream().map(NodeDef::getOp)
        .collect(Collectors.toSet());
    assertThat(types).containsAll(expectedTypes(family));

    DataflowGraph g = GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(), -1,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
    assertThat(g.size()).isGreaterThan(20);
    assertThat(g.ops().stream().map(Op::name)).contains("loss", "train_op");

    List<Double> first = losses(tg);
    List<Double> second = losses(tg);
    assertThat(first).hasSize(STEPS).allSatisfy(l -> assertThat(l).isFinite().isPositive());
    assertThat(second).isEqualTo(first);
    // sane: training does not blow up (random batches each step, so not strictly decreasing)
    assertThat(first.get(STEPS - 1)).isLessThan(3 * first.get(0));
  }

  @Test
  void resourceVariablesAndSlotsAreParameters() {
    TrainingGraph tg = Corpus.Family.EMBEDDING_RESOURCE.build(Corpus.Size.SMALL, 7);
    DataflowGraph g = GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(), -1,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
    // table 1000 x 8; fc1 32 x 16 + 16 and fc2 16 x 2 + 2, each with a momentum slot:
    // (8,000 + 2 x (528 + 34)) floats x 4 bytes = 36,496 bytes
    assertThat(g.persistentBytes()).isEqualTo(36_496);
  }

  /**
   * What runs after the weight updates (the moving average of the weights, the global step's
   * increment) is not of the forward pass, whatever its scope: no planner may clone it before
   * the updates. The moving statistics of batch norm are updates of their own; the convolutions
   * and the learning rate schedule (read by the updates) stay in the forward pass.
   */
  @Test
  void opsAfterTheUpdatesAreNotForward() {
    TrainingGraph tg = Corpus.Family.CNN_RECIPE.build(Corpus.Size.SMALL, 7);
    DataflowGraph g = GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(), -1,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
    List<Op> ema = g.ops().stream().filter(o -> o.name().startsWith("ema_1/")).toList();
    assertThat(ema).extracting(Op::type).contains("Sub", "Mul", "AssignSub");
    assertThat(ema).allSatisfy(o -> assertThat(o.category()).as(o.name())
        .isEqualTo(dev.lms4j.core.graph.OpCategory.OPTIMIZER));
    assertThat(g.opOrThrow("schedule_1/increment").category())
        .isEqualTo(dev.lms4j.core.graph.OpCategory.OPTIMIZER);
    assertThat(g.opOrThrow("stem_bn_moving/mean_update").category())
        .isEqualTo(dev.lms4j.core.graph.OpCategory.OPTIMIZER);
    assertThat(g.ops().stream().filter(o -> o.type().equals("Conv2D")))
        .isNotEmpty().allSatisfy(o -> assertThat(o.category())
            .isEqualTo(dev.lms4j.core.graph.OpCategory.FORWARD));
    assertThat(g.opOrThrow("schedule/learning_rate").category())
        .isEqualTo(dev.lms4j.core.graph.OpCategory.FORWARD);
  }

  /**
   * Every family builds the same graph in another process, at every size: TensorFlow's C++
   * gradient builder once named the weight-decay gradients of cnn-recipe in an order that
   * changed from process to process (a 9-input AddN differentiated; its edges are ordered by
   * address), which a build twice in one process does not show.
   */
  @Test
  void everyFamilyBuildsTheSameGraphInAnotherProcess() throws Exception {
    Process p = new ProcessBuilder(
        java.nio.file.Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-cp", System.getProperty("java.class.path"), GraphHashes.class.getName())
        .redirectError(ProcessBuilder.Redirect.DISCARD).start();
    String child = new String(p.getInputStream().readAllBytes(),
        java.nio.charset.StandardCharsets.UTF_8);
    assertThat(p.waitFor()).isZero();
    assertThat(child).isEqualTo(GraphHashes.all());
  }

  /** Each family's GraphDef hash at each size, a line each (run in a child JVM above). */
  static final class GraphHashes {
    static String all() {
      StringBuilder sb = new StringBuilder();
      for (Corpus.Family f : Corpus.families()) {
        for (Corpus.Size size : Corpus.Size.values()) {
          sb.append(f.label()).append(' ').append(size).append(' ')
              .append(java.util.Arrays.hashCode(f.build(size, 42).graphDef().toByteArray()))
              .append('\n');
        }
      }
      return sb.toString();
    }

    public static void main(String[] args) {
      System.out.print(all());
    }
  }

  @Test
  void unknownFamilyNamesTheKnownOnes() {
    assertThat(Corpus.getOrThrow("LSTM")).isEqualTo(Corpus.Family.LSTM);
    assertThatThrownBy(() -> Corpus.getOrThrow("nope"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("resnet-resource");
  }

  private static List<Double> losses(TrainingGraph tg) {
    List<Double> out = new ArrayList<>();
    StepLoop.run(tg.graphDef(), tg.manifest(), SessionConfigs.lms(), STEPS, 42,
        (StepRecord r) -> out.add(r.loss()));
    return out;
  }

  private static Set<String> expectedTypes(Corpus.Family f) {
    return switch (f) {
      case RESNET_RESOURCE -> Set.of("VarHandleOp", "ReadVariableOp", "AssignVariableOp",
          "ResourceApplyMomentum", "FusedBatchNormV3", "FusedBatchNormGradV3");
      case RESNET_REF -> Set.of("VariableV2", "ApplyGradientDescent", "FusedBatchNormV3");
      case LSTM -> Set.of("VarHandleOp", "ReadVariableOp", "ResourceApplyGradientDescent",
          "Unpack", "AddN");
      case GRU -> Set.of("VariableV2", "ApplyRMSProp", "AddN");
      case ENCODER -> Set.of("GatherV2", "BatchMatMulV3", "Softmax", "Tanh", "ApplyAdam");
      case EMBEDDING_DENSE -> Set.of("GatherV2", "UnsortedSegmentSum", "ApplyGradientDescent");
      case EMBEDDING_SPARSE, INIT_HEAVY -> Set.of("GatherV2", "ScatterSub");
      case EMBEDDING_RESOURCE -> Set.of("ResourceGather", "ResourceScatterSub",
          "ResourceApplyMomentum");
      case DENSENET -> Set.of("ConcatV2", "ApplyMomentum");
      case UNET -> Set.of("Conv2DBackpropInput", "ConcatV2", "MaxPoolV2");
      case MOBILENET -> Set.of("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter",
          "Relu6", "Relu6Grad", "FusedBatchNormV3", "ApplyRMSProp");
      case MLP_DROPOUT -> Set.of("RandomUniform", "L2Loss", "Maximum", "ApplyAdam");
      case CNN_RECIPE -> Set.of("FusedBatchNormV3", "AssignSub", "AssignAdd", "L2Loss", "Pow",
          "ApplyMomentum");
      case MLP_MIXED -> Set.of("Cast", "MatMul", "BiasAddGrad", "ReluGrad", "ApplyMomentum");
      case ENCODER_EINSUM -> Set.of("Einsum", "Softmax", "Tanh", "GatherV2", "ApplyAdam");
    };
  }
}
