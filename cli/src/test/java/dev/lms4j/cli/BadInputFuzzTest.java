package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.models.ModelZoo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.ShrinkingMode;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * Property-based fuzzing of the graph and manifest a user hands to {@code lms4j analyze}:
 * mutated GraphDefs (nodes removed, renamed, duplicated, retyped, inputs re-pointed to missing or
 * out-of-range outputs, bytes flipped or cut) and mutated manifests (keys removed, values of the
 * wrong kind, fractions, duplicates). Whatever the input, the command ends within a minute with
 * exit code 0, 1 or 2, never with a stack trace, and bad input (2) is one line on stderr.
 * The tries are bounded so the suite stays fast.
 */
class BadInputFuzzTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static Path dir;
  private static GraphDef graph;
  private static ObjectNode manifest;
  private static Path goodPb;
  private static Path goodManifest;

  @AfterContainer
  static void removeFiles() {
    Pipeline.deleteTree(dir);
  }

  @BeforeContainer
  static void files() throws Exception {
    dir = Files.createTempDirectory("lms4j-fuzz");
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(8,
        Map.of("layers", "2", "width", "32", "input", "16"));
    goodPb = dir.resolve("good.pb");
    goodManifest = dir.resolve("good.json");
    tg.write(goodPb, goodManifest);
    graph = tg.graphDef();
    manifest = (ObjectNode) JSON.readTree(goodManifest.toFile());
  }

  /** One edit of a GraphDef: a kind and three numbers that pick nodes, inputs and values. */
  record GraphEdit(int kind, int a, int b, int c) {}

  /** One edit of a manifest: a kind, a key, a value kind and a number. */
  record ManifestEdit(int kind, int key, int value, int n) {}

  @Provide
  Arbitrary<List<GraphEdit>> graphEdits() {
    Arbitrary<GraphEdit> e = Combinators.combine(Arbitraries.integers().between(0, 8),
        Arbitraries.integers().between(0, 1 << 16), Arbitraries.integers().between(0, 1 << 16),
        Arbitraries.integers().between(-2, 12)).as(GraphEdit::new);
    return e.list().ofMinSize(1).ofMaxSize(3);
  }

  @Provide
  Arbitrary<List<ManifestEdit>> manifestEdits() {
    Arbitrary<ManifestEdit> e = Combinators.combine(Arbitraries.integers().between(0, 4),
        Arbitraries.integers().between(0, 9), Arbitraries.integers().between(0, 9),
        Arbitraries.integers().between(-3, 1 << 20)).as(ManifestEdit::new);
    return e.list().ofMinSize(1).ofMaxSize(3);
  }

  @Property(tries = 20, shrinking = ShrinkingMode.OFF, seed = "17")
  void mutatedGraphsNeverCrash(@ForAll("graphEdits") List<GraphEdit> edits) throws Exception {
    byte[] bytes = mutate(graph, edits);
    Path pb = dir.resolve("g.pb");
    Files.write(pb, bytes);
    check(edits.toString(), pb, goodManifest);
  }

  @Property(tries = 20, shrinking = ShrinkingMode.OFF, seed = "17")
  void mutatedManifestsNeverCrash(@ForAll("manifestEdits") List<ManifestEdit> edits)
      throws Exception {
    ObjectNode m = manifest.deepCopy();
    for (ManifestEdit e : edits) {
      apply(m, e);
    }
    Path mf = dir.resolve("m.json");
    Files.writeString(mf, JSON.writeValueAsString(m));
    check(edits + " -> " + m, goodPb, mf);
  }

  private static void check(String what, Path pb, Path mf) {
    CliRun.Result r = assertTimeoutPreemptively(Duration.ofSeconds(60), () -> CliRun.exec(
        "analyze", "--graph", pb.toString(), "--manifest", mf.toString(), "--budget", "64MiB"),
        "analyze hung on " + what);
    assertThat(r.code()).as("exit code for %s; stderr %s", what, r.err()).isIn(0, 1, 2);
    assertThat(r.err()).as("stderr for %s", what).doesNotContain("\tat ")
        .doesNotContain("Exception in").doesNotContain("NullPointerException");
    if (r.code() == 2) {
      assertThat(r.err().lines().filter(l -> !l.isBlank()).toList()).as("stderr for %s", what)
          .hasSize(1).allMatch(l -> l.startsWith("lms4j: "));
    }
  }

  private static byte[] mutate(GraphDef gd, List<GraphEdit> edits) {
    GraphDef.Builder b = gd.toBuilder();
    byte[] raw = null;
    for (GraphEdit e : edits) {
      int n = b.getNodeCount();
      if (n == 0) {
        break;
      }
      int i = e.a() % n;
      NodeDef node = b.getNode(i);
      String other = b.getNode(e.b() % n).getName();
      switch (e.kind()) {
        case 0 -> b.removeNode(i);
        case 1 -> {
          if (node.getInputCount() > 0) {
            b.setNode(i, node.toBuilder().setInput(e.b() % node.getInputCount(),
                e.c() < 0 ? "missing_" + e.b() : other + ":" + e.c()));
          }
        }
        case 2 -> b.setNode(i, node.toBuilder().addInput(e.c() % 2 == 0 ? "^" + other
            : other + ":" + e.c()));
        case 3 -> b.setNode(i, node.toBuilder().setOp(List.of("Identity", "NoOp", "MatMul",
            "Bogus", "", "Const", "Placeholder").get(Math.floorMod(e.c(), 7))));
        case 4 -> b.addNode(node);
        case 5 -> b.setNode(i, node.toBuilder().setName(e.c() < 0 ? "" : other));
        case 6 -> b.setNode(i, node.toBuilder().clearInput());
        case 7 -> b.setNode(i, node.toBuilder().clearAttr());
        default -> {
          raw = b.build().toByteArray();
          int p = e.b() % raw.length;
          if (e.c() % 2 == 0) {
            raw = Arrays.copyOf(raw, p);
          } else {
            raw[p] ^= (byte) (1 + (e.a() & 0x7f));
          }
        }
      }
      if (raw != null) {
        return raw;
      }
    }
    return b.build().toByteArray();
  }

  private static void apply(ObjectNode m, ManifestEdit e) {
    JsonNodeFactory f = JSON.getNodeFactory();
    JsonNode v = switch (e.value()) {
      case 0 -> f.numberNode(e.n());
      case 1 -> f.numberNode(e.n() + 0.5);
      case 2 -> f.textNode("t" + e.n());
      case 3 -> f.nullNode();
      case 4 -> f.arrayNode().add(e.n()).add(-1);
      case 5 -> f.objectNode().put("k", e.n());
      case 6 -> f.booleanNode(e.n() % 2 == 0);
      case 7 -> f.textNode(m.path("loss").asText("loss").replaceAll(":.*", "") + ":" + e.n());
      case 8 -> f.textNode("");
      default -> f.arrayNode();
    };
    ArrayNode feeds = m.get("feeds") instanceof ArrayNode a ? a : null;
    ObjectNode feed = feeds != null && feeds.size() > 0 && feeds.get(Math.floorMod(e.n(),
        feeds.size())) instanceof ObjectNode o ? o : null;
    String[] top = {"feeds", "loss", "train_op", "init", "metrics"};
    String[] feedKeys = {"name", "shape", "dtype", "fill"};
    switch (e.kind()) {
      case 0 -> m.remove(top[e.key() % top.length]);
      case 1 -> m.set(top[e.key() % top.length], v);
      case 2 -> {
        if (feed != null) {
          feed.set(feedKeys[e.key() % feedKeys.length], v);
        }
      }
      case 3 -> {
        if (feed != null && feed.get("shape") instanceof ArrayNode s && s.size() > 0) {
          s.set(e.key() % s.size(), v);
        }
      }
      default -> {
        if (feeds != null && feed != null) {
          feeds.add(feed.deepCopy());
        }
      }
    }
  }
}
