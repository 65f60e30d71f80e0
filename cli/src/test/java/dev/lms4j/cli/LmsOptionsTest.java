package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.memory.Tier;
import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.tf.Lms;
import dev.lms4j.tf.LmsResult;
import dev.lms4j.tf.SwapPath;
import dev.lms4j.tf.SwapRewriter;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.models.ModelZoo;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import picocli.CommandLine;

/**
 * Every planner flag the commands share ({@link LmsOptions}) reaches the {@link Lms} the command
 * plans with: each set to a value other than its default on the command line of train, run,
 * analyze and rewrite, then read back from the built instance (its parameters, budget, swap path
 * and mechanism) and, for the swap directory, from the disk tier's rewritten graph.
 */
class LmsOptionsTest {
  @TempDir Path dir;

  static Stream<Arguments> commands() {
    return Stream.of(
        Arguments.of("train", (Function<Object, LmsOptions>) c -> ((TrainCommand) c).lms,
            (java.util.function.Supplier<Object>) TrainCommand::new),
        Arguments.of("run", (Function<Object, LmsOptions>) c -> ((RunCommand) c).lms,
            (java.util.function.Supplier<Object>) RunCommand::new),
        Arguments.of("analyze", (Function<Object, LmsOptions>) c -> ((AnalyzeCommand) c).lms,
            (java.util.function.Supplier<Object>) AnalyzeCommand::new),
        Arguments.of("rewrite", (Function<Object, LmsOptions>) c -> ((RewriteCommand) c).lms,
            (java.util.function.Supplier<Object>) RewriteCommand::new));
  }

  /** The arguments, with rewrite's required {@code --out}. */
  private String[] args(String command, String... a) {
    return command.equals("rewrite") ? Stream.concat(Stream.of(a), Stream.of("--out",
        dir.resolve("o.pb").toString())).toArray(String[]::new) : a;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("commands")
  void everyPlannerFlagReachesThePlanner(String name, Function<Object, LmsOptions> lmsOf,
      java.util.function.Supplier<Object> make) throws Exception {
    Path swap = dir.resolve("swap-" + name);
    Object cmd = make.get();
    new CommandLine(cmd).parseArgs(args(name, "--model", "mlp", "--batch", "64",
        "--budget", "48MiB", "--lms", "tflms",
        "--swapout-threshold", "1", "--swapin-ahead", "2", "--swapin-groupby", "0",
        "--sync-mode", "3", "--serialization", "1,3:5", "--serialization-by-size", "0.5",
        "--excl-output-scopes", "eos", "--excl-output-types", "EOT",
        "--incl-output-scopes", "ios", "--incl-output-types", "IOT",
        "--excl-input-scopes", "eis", "--excl-input-types", "EIT",
        "--incl-input-scopes", "iis,iis2", "--incl-input-types", "IIT",
        "--tier", "disk", "--swap-dir", swap.toString(), "--swap-path", "standard",
        "--swap-overlap", "--mem-ratio", "0.65"));
    Lms lms = lmsOf.apply(cmd).lms(64);
    SwapParams p = lms.params();
    assertThat(lms.mode()).isEqualTo(LmsMode.TFLMS);
    assertThat(lms.budget().bytes()).isEqualTo(48L << 20);
    assertThat(lms.budget().memRatio()).isEqualTo(0.65);
    assertThat(p.swapoutThreshold()).isEqualTo(1);
    assertThat(p.swapinAhead()).isEqualTo(2);
    assertThat(p.swapinGroupby()).isZero();
    assertThat(p.syncMode()).isEqualTo(3);
    assertThat(p.serialization()).containsExactly("1", "3:5");
    assertThat(p.serializationSlices()).hasSize(2);
    assertThat(p.serializationBySize()).isEqualTo(0.5);
    assertThat(p.exclOutputByScopes()).isEqualTo(Set.of("eos"));
    assertThat(p.exclOutputByTypes()).isEqualTo(Set.of("EOT"));
    assertThat(p.inclOutputByScopes()).isEqualTo(Set.of("ios"));
    assertThat(p.inclOutputByTypes()).isEqualTo(Set.of("IOT"));
    assertThat(p.exclInputByScopes()).isEqualTo(Set.of("eis"));
    assertThat(p.exclInputByTypes()).isEqualTo(Set.of("EIT"));
    assertThat(p.inclInputByScopes()).isEqualTo(Set.of("iis", "iis2"));
    assertThat(p.inclInputByTypes()).isEqualTo(Set.of("IIT"));
    assertThat(p.tier()).isEqualTo(Tier.DISK);
    assertThat(p.batchSize()).isEqualTo(64);
    assertThat(lms.swapPath()).isEqualTo(SwapPath.STANDARD);
    // overlap on the standard path: TensorFlow's own ops (the flag matters for native swaps)
    assertThat(lms.mechanism()).isEqualTo(SwapRewriter.Mechanism.STANDARD);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("commands")
  void theSwapDirectoryAndOverlapReachTheRewrittenGraph(String name,
      Function<Object, LmsOptions> lmsOf, java.util.function.Supplier<Object> make)
      throws Exception {
    Path swap = dir.resolve("swap-" + name);
    java.nio.file.Files.createDirectories(swap);
    Object cmd = make.get();
    // TFLMS with fixed parameters on a small MLP: swaps, to disk, through the native ops with
    // the asynchronous swap-out
    new CommandLine(cmd).parseArgs(args(name, "--model", "mlp",
        "--lms", "tflms", "--swapout-threshold", "1", "--swapin-ahead", "1",
        "--swapin-groupby", "0", "--tier", "disk", "--swap-dir", swap.toString(),
        "--swap-path", "native", "--swap-overlap"));
    Lms lms = lmsOf.apply(cmd).lms(64);
    assertThat(lms.mechanism()).isEqualTo(SwapRewriter.Mechanism.NATIVE_ASYNC);
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(64, Map.of("width", "64"));
    LmsResult r = lms.rewrite(tg);
    GraphDef gd = r.graphDef();
    List<String> paths = gd.getNodeList().stream()
        .filter(n -> n.getOp().equals(dev.lms4j.tf.NativeSwap.SWAP_OUT_DISK))
        .map(n -> n.getAttrOrThrow("path").getS().toStringUtf8()).toList();
    assertThat(paths).as("disk swap-outs").isNotEmpty()
        .allSatisfy(s -> assertThat(Path.of(s).getParent()).isEqualTo(swap));
    assertThat(gd.getNodeList().stream().map(NodeDef::getOp)).doesNotContain("WriteFile");
  }

  /**
   * run, analyze and rewrite plan through {@link Pipeline}, which builds its own planner from
   * the options: its memory ratio and swap directory are the command line's. On an MLP at
   * 32 MiB, TFLMS with auto-tuned parameters plans under 0.65 x 32 MiB with
   * {@code --mem-ratio 0.65} and above that (under 0.8 x 32) with the default ratio.
   */
  @org.junit.jupiter.api.Test
  void thePipelinePlansWithTheMemRatioAndSwapDirectoryGiven() throws Exception {
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(2048, Map.of("width", "256"));
    long budget = 32L << 20;
    Path swap = java.nio.file.Files.createDirectories(dir.resolve("pipeline-swap"));
    java.io.PrintStream quiet = new java.io.PrintStream(java.io.OutputStream.nullOutputStream());
    long[] predicted = new long[2];
    int i = 0;
    for (String ratio : List.of("0.65", "0.8")) {
      AnalyzeCommand cmd = new AnalyzeCommand();
      new CommandLine(cmd).parseArgs("--model", "mlp", "--budget", "32MiB", "--lms", "tflms",
          "--mem-ratio", ratio, "--tier", "disk", "--swap-dir", swap.toString(),
          "--swap-path", "native");
      Pipeline.Outcome o = Pipeline.execute("mlp", tg, cmd.lms, 0, false, quiet);
      assertThat(o.exitCode()).isZero();
      predicted[i++] = o.lms().predictedPeakAfter();
      List<String> paths = o.lms().graphDef().getNodeList().stream()
          .filter(n -> n.getOp().equals(dev.lms4j.tf.NativeSwap.SWAP_OUT_DISK))
          .map(n -> n.getAttrOrThrow("path").getS().toStringUtf8()).toList();
      assertThat(paths).as("disk swap-outs at ratio " + ratio).isNotEmpty()
          .allSatisfy(s -> assertThat(Path.of(s).getParent()).isEqualTo(swap));
    }
    assertThat(predicted[0]).isLessThanOrEqualTo((long) (0.65 * budget));
    assertThat(predicted[1]).isGreaterThan((long) (0.65 * budget))
        .isLessThanOrEqualTo((long) (0.8 * budget));
  }
}
