package dev.lms4j.train.models;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.TrainingGraph;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.tensorflow.Graph;
import org.tensorflow.GraphOperation;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.types.TFloat32;

class ModelZooTest {

  private static final int BATCH = 4;

  /** A small configuration per model, so the tests stay fast. */
  private static final Map<String, Map<String, String>> SMALL = Map.of(
      "mlp", Map.of("layers", "3", "width", "32", "input", "20", "classes", "5"),
      "resnet", Map.of("blocks", "1", "stages", "2", "width", "8", "image", "16", "classes", "5"));

  static Stream<String> models() {
    return ModelZoo.all().stream().map(ModelSpec::name);
  }

  private static TrainingGraph small(String name) {
    return ModelZoo.getOrThrow(name).build(BATCH, SMALL.get(name));
  }

  @Test
  void zooHasTheModelsWithDocumentedDefaults() {
    assertThat(ModelZoo.all()).extracting(ModelSpec::name).containsExactly("mlp", "resnet");
    assertThat(SMALL.keySet()).containsExactlyInAnyOrderElementsOf(
        models().collect(Collectors.toSet()));
    assertThat(ModelZoo.getOrThrow("mlp").defaultOptions())
        .containsEntry("layers", "8").containsEntry("width", "1024").containsEntry("input", "784");
    assertThat(ModelZoo.getOrThrow("resnet").defaultOptions())
        .containsKeys("blocks", "width", "image", "classes").containsEntry("image", "64");
    for (ModelSpec m : ModelZoo.all()) {
      assertThat(m.description()).isNotBlank();
      assertThat(m.defaultBatch()).isPositive();
      assertThat(ModelZoo.get(m.name())).containsSame(m);
    }
  }

  @Test
  void unknownModelNamesTheKnownOnes() {
    assertThat(ModelZoo.get("nope")).isEmpty();
    assertThatThrownBy(() -> ModelZoo.getOrThrow("nope"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("nope").hasMessageContaining("mlp").hasMessageContaining("resnet");
  }

  @ParameterizedTest
  @MethodSource("models")
  void manifestFollowsTheContract(String name) {
    TrainingGraph tg = small(name);
    Manifest m = tg.manifest();
    int classes = Integer.parseInt(SMALL.get(name).get("classes"));

    assertThat(m.loss()).isEqualTo("loss:0");
    assertThat(m.trainOp()).isEqualTo("train_op");
    assertThat(m.init()).isEqualTo("init");
    assertThat(m.feeds()).extracting(Manifest.Feed::name).containsExactly("x", "labels");
    Manifest.Feed x = m.feeds().get(0);
    Manifest.Feed labels = m.feeds().get(1);
    assertThat(x.dtype()).isEqualTo("float32");
    assertThat(x.fill()).isEqualTo("normal");
    assertThat(x.batch()).isEqualTo(BATCH);
    assertThat(labels).isEqualTo(
        new Manifest.Feed("labels", "float32", new long[] {BATCH, classes}, "onehot"));
    assertThat(m.batchSize()).isEqualTo(BATCH);
    assertThat(Manifest.parse(m.toJson())).isEqualTo(m);

    Map<String, NodeDef> nodes = tg.graphDef().getNodeList().stream()
        .collect(Collectors.toMap(NodeDef::getName, n -> n));
    assertThat(nodes.get("loss").getOp()).isEqualTo("Mean");
    assertThat(nodes.get("init").getOp()).isEqualTo("NoOp");
    assertThat(nodes.get("train_op").getOp()).isEqualTo("NoOp");
    assertThat(nodes.get("x").getOp()).isEqualTo("Placeholder");
    assertThat(nodes.get("labels").getOp()).isEqualTo("Placeholder");

    List<NodeDef> vars = ofType(tg.graphDef(), "VariableV2");
    List<NodeDef> assigns = ofType(tg.graphDef(), "Assign");
    List<NodeDef> updates = ofType(tg.graphDef(), "ApplyGradientDescent");
    assertThat(vars).isNotEmpty().allSatisfy(v -> assertThat(v.getName()).startsWith(name + "/"));
    assertThat(assigns).hasSameSizeAs(vars);
    assertThat(updates).hasSameSizeAs(vars)
        .allSatisfy(u -> assertThat(u.getName()).startsWith("train/"));
    assertThat(nodes.get("init").getInputList())
        .containsExactlyInAnyOrderElementsOf(assigns.stream().map(a -> "^" + a.getName()).toList());
    assertThat(nodes.get("train_op").getInputList())
        .containsExactlyInAnyOrderElementsOf(updates.stream().map(a -> "^" + a.getName()).toList());
    assertThat(tg.graphDef().getNodeList()).anyMatch(n -> n.getName().startsWith("gradients/"));
    // every initialiser is seeded, so runs are reproducible
    assertThat(tg.graphDef().getNodeList())
        .filteredOn(n -> n.getOp().startsWith("Random") || n.getOp().equals("TruncatedNormal"))
        .isNotEmpty()
        .allSatisfy(n -> assertThat(n.getAttrOrThrow("seed").getI()).isNotZero());
  }

  @ParameterizedTest
  @MethodSource("models")
  void placeholdersHaveFullStaticShapes(String name) {
    TrainingGraph tg = small(name);
    try (Graph g = new Graph()) {
      g.importGraphDef(tg.graphDef());
      for (Manifest.Feed f : tg.manifest().feeds()) {
        GraphOperation op = g.operation(f.name());
        assertThat(op).as(f.name()).isNotNull();
        assertThat(op.output(0).shape()).isEqualTo(Shape.of(f.shape()));
      }
    }
  }

  @ParameterizedTest
  @MethodSource("models")
  void trainsInProcessWithFiniteChangingLosses(String name) {
    float[] losses = train(small(name), 3);
    for (float l : losses) {
      assertThat(Float.isFinite(l)).as("loss %s of %s is finite", l, name).isTrue();
    }
    assertThat(losses[1]).isNotEqualTo(losses[0]);
    assertThat(losses[2]).isNotEqualTo(losses[1]);
  }

  @ParameterizedTest
  @MethodSource("models")
  void buildsAreDeterministic(String name) {
    GraphDef a = small(name).graphDef();
    GraphDef b = small(name).graphDef();
    assertThat(b).isEqualTo(a);
    assertThat(b.toByteArray()).isEqualTo(a.toByteArray());
    assertThat(small(name).manifest()).isEqualTo(small(name).manifest());
  }

  @ParameterizedTest
  @MethodSource("models")
  void optionsChangeTheGraph(String name) {
    Map<String, String> other = new HashMap<>(SMALL.get(name));
    other.put("seed", "7");
    assertThat(ModelZoo.getOrThrow(name).build(BATCH, other).graphDef())
        .isNotEqualTo(small(name).graphDef());
    assertThat(ModelZoo.getOrThrow(name).build(BATCH + 1, SMALL.get(name)).manifest().batchSize())
        .isEqualTo(BATCH + 1);
  }

  @ParameterizedTest
  @MethodSource("models")
  void unknownOptionIsRejected(String name) {
    ModelSpec m = ModelZoo.getOrThrow(name);
    assertThatThrownBy(() -> m.build(BATCH, Map.of("bogus", "1")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("bogus").hasMessageContaining("classes");
  }

  @ParameterizedTest
  @MethodSource("models")
  void badValuesAreRejected(String name) {
    ModelSpec m = ModelZoo.getOrThrow(name);
    assertThatThrownBy(() -> m.build(BATCH, Map.of("width", "wide")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("width").hasMessageContaining("wide");
    assertThatThrownBy(() -> m.build(BATCH, Map.of("classes", "0")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("classes");
    assertThatThrownBy(() -> m.build(BATCH, Map.of("lr", "-1")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("lr");
    assertThatThrownBy(() -> m.build(0, Map.of()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batch");
  }

  @Test
  void defaultOptionsAreAcceptedAsOverrides() {
    for (ModelSpec m : ModelZoo.all()) {
      Map<String, String> opts = new HashMap<>(m.defaultOptions());
      opts.putAll(SMALL.get(m.name()));
      assertThat(m.build(2, opts).graphDef()).isEqualTo(m.build(2, SMALL.get(m.name())).graphDef());
    }
  }

  private static List<NodeDef> ofType(GraphDef def, String type) {
    return def.getNodeList().stream().filter(n -> n.getOp().equals(type)).toList();
  }

  /** Imports the graph, runs init, then {@code steps} SGD steps on seeded synthetic feeds. */
  private static float[] train(TrainingGraph tg, int steps) {
    Manifest m = tg.manifest();
    float[] losses = new float[steps];
    Random random = new Random(1234);
    ConfigProto config = ConfigProto.newBuilder().setInterOpParallelismThreads(-1).build();
    try (Graph g = new Graph()) {
      g.importGraphDef(tg.graphDef());
      try (Session s = new Session(g, config)) {
        s.run(m.init());
        for (int i = 0; i < steps; i++) {
          List<TFloat32> feeds = m.feeds().stream().map(f -> synthetic(f, random)).toList();
          try {
            Session.Runner r = s.runner();
            for (int k = 0; k < feeds.size(); k++) {
              r.feed(m.feeds().get(k).name(), feeds.get(k));
            }
            try (Result res = r.fetch(m.loss()).addTarget(m.trainOp()).run()) {
              losses[i] = ((TFloat32) res.get(0)).getFloat();
            }
          } finally {
            feeds.forEach(Tensor::close);
          }
        }
      }
    }
    return losses;
  }

  private static TFloat32 synthetic(Manifest.Feed f, Random random) {
    assertThat(Set.of("normal", "onehot")).contains(f.fill());
    long[] shape = f.shape();
    float[] data = new float[Math.toIntExact(f.elements())];
    if (f.fill().equals("normal")) {
      for (int i = 0; i < data.length; i++) {
        data[i] = (float) random.nextGaussian();
      }
    } else {
      int classes = (int) shape[shape.length - 1];
      for (int row = 0; row < data.length / classes; row++) {
        data[row * classes + random.nextInt(classes)] = 1f;
      }
    }
    return TFloat32.tensorOf(Shape.of(shape), DataBuffers.of(data, true, false));
  }
}
