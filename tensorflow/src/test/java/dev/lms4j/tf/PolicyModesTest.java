package dev.lms4j.tf;

import static dev.lms4j.tf.TfTests.nodes;
import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.core.plan.LmsMode;
import dev.lms4j.core.plan.SwapPlan;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * The user's marks in the graph hold in every mode: {@code _recompute_hint} on relu1 and
 * {@code _swap_to_host} on the backward op that reads relu0, with the same losses as the graph as
 * it is.
 */
class PolicyModesTest {
  private static final TrainingGraph NET = TinyNet.build(64, 128, 4);
  private static final List<Double> LOSSES = TfTests.losses(NET.graphDef(), NET.manifest());

  /** The first backward op that reads relu0, and the input index it reads it at. */
  private static Map.Entry<String, Integer> relu0Reader() {
    for (NodeDef n : NET.graphDef().getNodeList()) {
      if (n.getName().startsWith("gradients/")) {
        int i = n.getInputList().indexOf("relu0");
        if (i >= 0) {
          return Map.entry(n.getName(), i);
        }
      }
    }
    throw new AssertionError("no backward reader of relu0");
  }

  private static GraphDef marked(String reader, int index) {
    return NET.graphDef().toBuilder().clearNode().addAllNode(NET.graphDef().getNodeList()
        .stream().map(x -> x.getName().equals("relu1") ? x.toBuilder()
            .putAttr(RecomputeRewriter.HINT_ATTR, AttrValue.newBuilder().setB(true).build())
            .build()
            : x.getName().equals(reader) ? x.toBuilder().putAttr(GraphDefs.SWAP_TO_HOST_ATTR,
                AttrValue.newBuilder().setList(AttrValue.ListValue.newBuilder().addI(index))
                    .build()).build()
            : x).toList()).build();
  }

  @ParameterizedTest
  @EnumSource(value = LmsMode.class, names = {"TFLMS", "SWAP", "REMAT", "AUTO"})
  void hintsAndSwapMarksHoldInEveryMode(LmsMode mode, @TempDir Path dir) {
    Map.Entry<String, Integer> reader = relu0Reader();
    GraphDef gd = marked(reader.getKey(), reader.getValue());
    // a generous budget: the marks alone are the plan (no mode needs to add anything)
    LmsBuilder b = Lms.builder().mode(mode).dumpDot(dir.resolve("dot"));
    if (mode != LmsMode.REMAT) {
      b.budget(1L << 30);
    }
    LmsResult r = b.build().rewrite(new TrainingGraph(gd, NET.manifest()));
    assertThat(r.memoryPlan().recomputeStages().get(0).groups()).singleElement()
        .satisfies(g -> assertThat(g.ops()).containsExactly("relu1"));
    SwapPlan.SwapOut so = r.plan().swapOuts().stream()
        .filter(s -> s.producer().equals("relu0")).findFirst().orElseThrow();
    assertThat(so.swapIns()).anySatisfy(si -> assertThat(si.consumers())
        .containsExactly(reader.getKey()));
    NodeDef consumer = nodes(r.graphDef()).get(reader.getKey());
    assertThat(consumer.getInput(reader.getValue())).startsWith("lms4j/swapin/relu0");
    assertThat(TfTests.losses(r.graphDef(), NET.manifest())).containsExactlyElementsOf(LOSSES);
    // the DOT dump marks what was swapped and recomputed
    String before = readString(dir.resolve("dot/before.dot"));
    String after = readString(dir.resolve("dot/after.dot"));
    assertThat(before).contains("\"relu0\" [label=\"relu0\\nRelu\", style=filled, "
        + "fillcolor=\"#deebf7\"").contains("\"relu1\" [label=\"relu1\\nRelu\", style=filled, "
        + "fillcolor=\"#fee6ce\"").doesNotContain("lms4j/");
    assertThat(after).contains("\"lms4j/swapin/relu0").contains("\"lms4j/recompute/")
        .contains("-> \"" + reader.getKey() + "\"");
  }

  private static String readString(Path p) {
    try {
      return Files.readString(p);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
