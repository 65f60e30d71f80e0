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
      "resnet", Map.of("blocks", "1", "stages", "2", "width", "8", "image", "16", "classes", "5"),
      "lenet", Map.of("width", "4", "dense", "16", "image", "10", "classes", "5"),
      "resnet18", Map.of("width", "4", "image", "32", "classes", "5"),
      "resnet50", Map.of("width", "2", "image", "32", "classes", "5"),
      "resnet101", Map.of("width", "1", "image", "32", "classes", "5"),
      "vgg16", Map.of("width", "2", "fc", "8", "image", "32", "classes", "5"),
      "unet3d", Map.of("width", "2", "side", "8", "levels", "3", "classes", "5"),
      "gpt2", Map.of("layers", "2", "width", "16", "heads", "2", "seq", "8", "vocab", "5"));

  /** Models whose only output dimension is the label's last one ({@code gpt2} has no labels). */
  private static final Set<String> TOKENS = Set.of("gpt2");

  static Stream<String> models() {
    return ModelZoo.all().stream().map(ModelSpec::name);
  }

  /** Built graphs, shared by the tests (resnet101 takes seconds to build). */
  private static final Map<String, TrainingGraph> BUILT = new java.util.concurrent.ConcurrentHashMap<>();

  private static TrainingGraph small(String name) {
    return BUILT.computeIfAbsent(name, n -> ModelZoo.getOrThrow(n).build(BATCH, SMALL.get(n)));
  }

  @Test
  void zooHasTheModelsWithDocumentedDefaults() {
    assertThat(ModelZoo.all()).extracting(ModelSpec::name)
        .containsExactly("mlp", "resnet", "lenet", "resnet18", "resnet50", "resnet101", "vgg16",
            "unet3d", "gpt2");
    assertThat(SMALL.keySet()).containsExactlyInAnyOrderElementsOf(
        models().collect(Collectors.toSet()));
    assertThat(ModelZoo.getOrThrow("mlp").defaultOptions())
        .containsEntry("layers", "8").containsEntry("width", "1024").containsEntry("input", "784");
    assertThat(ModelZoo.getOrThrow("resnet").defaultOptions())
        .containsKeys("blocks", "width", "image", "classes").containsEntry("image", "64");
    assertThat(ModelZoo.getOrThrow("lenet").defaultOptions())
        .containsEntry("width", "32").containsEntry("dense", "1024").containsEntry("image", "28")
        .containsEntry("channels", "1").containsEntry("momentum", "0.9");
    assertThat(ModelZoo.getOrThrow("lenet").defaultBatch()).isEqualTo(100);
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
        .hasMessageContaining("nope").hasMessageContaining("mlp").hasMessageContaining("resnet")
        .hasMessageContaining("lenet");
  }

  @ParameterizedTest
  @MethodSource("models")
  void manifestFollowsTheContract(String name) {
    TrainingGraph tg = small(name);
    Manifest m = tg.manifest();
    // the checks a loaded graph goes through (GraphChecks) accept every zoo graph
    assertThat(tg.validate()).isSameAs(tg);
    assertThat(m.loss()).isEqualTo("loss:0");
    assertThat(m.trainOp()).isEqualTo("train_op");
    assertThat(m.init()).isEqualTo("init");
    Manifest.Feed x = m.feeds().get(0);
    assertThat(x.name()).isEqualTo("x");
    assertThat(x.dtype()).isEqualTo("float32");
    assertThat(x.batch()).isEqualTo(BATCH);
    if (TOKENS.contains(name)) {
      // token ids come from one uniform feed of seq + 1 positions
      assertThat(m.feeds()).hasSize(1);
      assertThat(x).isEqualTo(new Manifest.Feed("x", "float32", new long[] {BATCH, 9}, "uniform"));
    } else {
      int classes = Integer.parseInt(SMALL.get(name).get("classes"));
      assertThat(m.feeds()).extracting(Manifest.Feed::name).containsExactly("x", "labels");
      assertThat(x.fill()).isEqualTo("normal");
      Manifest.Feed labels = m.feeds().get(1);
      assertThat(labels.fill()).isEqualTo("onehot");
      assertThat(labels.batch()).isEqualTo(BATCH);
      assertThat(labels.shape()[labels.shape().length - 1]).isEqualTo(classes);
      if (!name.equals("unet3d")) {
        assertThat(labels.shape()).containsExactly(BATCH, classes);
      }
    }
    assertThat(m.batchSize()).isEqualTo(BATCH);
    assertThat(Manifest.parse(m.toJson())).isEqualTo(m);

    Map<String, NodeDef> nodes = tg.graphDef().getNodeList().stream()
        .collect(Collectors.toMap(NodeDef::getName, n -> n));
    assertThat(nodes.get("loss").getOp()).isEqualTo("Mean");
    assertThat(nodes.get("init").getOp()).isEqualTo("NoOp");
    assertThat(nodes.get("train_op").getOp()).isEqualTo("NoOp");
    assertThat(nodes.get("x").getOp()).isEqualTo("Placeholder");
    if (!TOKENS.contains(name)) {
      assertThat(nodes.get("labels").getOp()).isEqualTo("Placeholder");
    }

    assertThat(m.metrics()).containsExactly(Map.entry("accuracy", "accuracy:0"));
    assertThat(nodes.get("accuracy").getOp()).isEqualTo("Mean");

    // trainable variables live under the model's scope, optimizer slots under train/
    List<NodeDef> vars = ofType(tg.graphDef(), "VariableV2");
    List<NodeDef> trainable = vars.stream().filter(v -> !v.getName().startsWith("train/"))
        .toList();
    List<NodeDef> slots = vars.stream().filter(v -> v.getName().startsWith("train/")).toList();
    List<NodeDef> assigns = ofType(tg.graphDef(), "Assign");
    List<NodeDef> updates = tg.graphDef().getNodeList().stream()
        .filter(n -> n.getOp().equals("ApplyGradientDescent") || n.getOp().equals("ApplyMomentum"))
        .toList();
    assertThat(trainable).isNotEmpty()
        .allSatisfy(v -> assertThat(v.getName()).startsWith(name + "/"));
    assertThat(slots).allSatisfy(v -> assertThat(v.getName()).endsWith("_momentum"));
    assertThat(slots).hasSize(name.equals("lenet") ? trainable.size() : 0);
    assertThat(assigns).hasSameSizeAs(vars);
    assertThat(updates).hasSameSizeAs(trainable)
        .allSatisfy(u -> assertThat(u.getName()).startsWith("train/"))
        .allSatisfy(u -> assertThat(u.getOp()).isEqualTo(name.equals("lenet") ? "ApplyMomentum"
            : "ApplyGradientDescent"));
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
    TrainingGraph first = small(name);
    TrainingGraph again = ModelZoo.getOrThrow(name).build(BATCH, SMALL.get(name));
    GraphDef a = first.graphDef();
    GraphDef b = again.graphDef();
    assertThat(b).isEqualTo(a);
    assertThat(b.toByteArray()).isEqualTo(a.toByteArray());
    assertThat(again.manifest()).isEqualTo(first.manifest());
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
        .hasMessageContaining("bogus").hasMessageContaining("width");
  }

  @ParameterizedTest
  @MethodSource("models")
  void badValuesAreRejected(String name) {
    ModelSpec m = ModelZoo.getOrThrow(name);
    assertThatThrownBy(() -> m.build(BATCH, Map.of("width", "wide")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("width").hasMessageContaining("wide");
    String classes = TOKENS.contains(name) ? "vocab" : "classes";
    assertThatThrownBy(() -> m.build(BATCH, Map.of(classes, "0")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(classes);
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
      assertThat(m.build(BATCH, opts).graphDef()).isEqualTo(small(m.name()).graphDef());
    }
  }

  @ParameterizedTest
  @MethodSource("models")
  void accuracyIsTheShareOfArgmaxMatches(String name) {
    TrainingGraph tg = small(name);
    NodeDef xent = tg.graphDef().getNodeList().stream()
        .filter(n -> n.getOp().equals("SoftmaxCrossEntropyWithLogits")).findFirst().orElseThrow();
    // the cross entropy's inputs: [rows, classes] logits and one-hot targets (per voxel for
    // unet3d, per position for gpt2)
    String logitsName = xent.getInput(0);
    String labelsName = xent.getInput(1);
    Random random = new Random(5);
    ConfigProto config = ConfigProto.newBuilder().setInterOpParallelismThreads(-1).build();
    try (Graph g = new Graph()) {
      g.importGraphDef(tg.graphDef());
      try (Session s = new Session(g, config)) {
        s.run(tg.manifest().init());
        List<TFloat32> feeds = tg.manifest().feeds().stream().map(f -> synthetic(f, random))
            .toList();
        Session.Runner runner = s.runner();
        for (int k = 0; k < feeds.size(); k++) {
          runner.feed(tg.manifest().feeds().get(k).name(), feeds.get(k));
        }
        boolean fed = labelsName.equals("labels");
        if (!fed) {
          runner.fetch(labelsName);
        }
        try (Result res = runner.fetch(logitsName).fetch("accuracy").run()) {
          TFloat32 logits = (TFloat32) res.get(fed ? 0 : 1);
          TFloat32 labels = fed ? feeds.get(1) : (TFloat32) res.get(0);
          int rows = (int) logits.shape().get(0);
          int classes = (int) logits.shape().get(1);
          int correct = 0;
          for (int r = 0; r < rows; r++) {
            correct += argmax(logits, r, classes) == argmax(labels, r, classes) ? 1 : 0;
          }
          TFloat32 accuracy = (TFloat32) res.get(fed ? 1 : 2);
          assertThat(accuracy.shape().numDimensions()).isZero();
          assertThat(accuracy.getFloat()).isEqualTo((float) correct / rows);
        } finally {
          feeds.forEach(Tensor::close);
        }
      }
    }
  }

  private static int argmax(TFloat32 t, int row, int classes) {
    int best = 0;
    for (int k = 1; k < classes; k++) {
      if (t.getFloat(row, k) > t.getFloat(row, best)) {
        best = k;
      }
    }
    return best;
  }

  /** Every model class once: resnet50 and resnet101 are resnet18's class, and slow to train. */
  static Stream<String> modelClasses() {
    return models().filter(n -> !n.equals("resnet50") && !n.equals("resnet101"));
  }

  @ParameterizedTest
  @MethodSource("modelClasses")
  void adamAddsTwoSlotsPerVariableAndTrains(String name) {
    Map<String, String> opts = new HashMap<>(SMALL.get(name));
    opts.put("optimizer", "adam");
    TrainingGraph tg = ModelZoo.getOrThrow(name).build(BATCH, opts);
    GraphDef gd = tg.graphDef();
    List<NodeDef> updates = ofType(gd, "ApplyAdam");
    GraphDef sgd = small(name).graphDef();
    int weights = ofType(sgd, "VariableV2").size()
        - ofType(sgd, "VariableV2").stream().filter(n -> n.getName().startsWith("train/"))
            .toList().size();
    assertThat(updates).hasSize(weights);
    assertThat(ofType(gd, "ApplyGradientDescent")).isEmpty();
    assertThat(ofType(gd, "ApplyMomentum")).isEmpty();
    // the weights, two slots each, and the two powers of the decay rates
    assertThat(ofType(gd, "VariableV2")).hasSize(3 * weights + 2);
    Set<String> names = gd.getNodeList().stream().map(NodeDef::getName)
        .collect(Collectors.toSet());
    for (NodeDef u : updates) {
      String slot = "train/" + u.getInput(0).replace('/', '_');
      assertThat(u.getInputList()).startsWith(u.getInput(0), slot + "_m", slot + "_v",
          "train/beta1_power", "train/beta2_power");
      assertThat(names).contains(slot + "_m", slot + "_v");
    }
    // the powers advance only after every update has read them
    NodeDef power = gd.getNodeList().stream()
        .filter(n -> n.getName().equals("train/beta1_power_update")).findFirst().orElseThrow();
    assertThat(power.getInputList()).containsAll(updates.stream().map(u -> "^" + u.getName())
        .toList());
    float[] losses = train(tg, 3);
    for (float l : losses) {
      assertThat(Float.isFinite(l)).as("loss %s of %s with adam", l, name).isTrue();
    }
    assertThat(losses[1]).isNotEqualTo(losses[0]);
    assertThatThrownBy(() -> ModelZoo.getOrThrow(name).build(BATCH, Map.of("optimizer", "rms")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("optimizer")
        .hasMessageContaining("sgd, momentum, adam");
  }

  @Test
  void lenetWithoutMomentumIsPlainSgdAndMomentumMustBeBelowOne() {
    ModelSpec lenet = ModelZoo.getOrThrow("lenet");
    Map<String, String> opts = new HashMap<>(SMALL.get("lenet"));
    opts.put("momentum", "0");
    GraphDef sgd = lenet.build(BATCH, opts).graphDef();
    assertThat(ofType(sgd, "ApplyMomentum")).isEmpty();
    assertThat(ofType(sgd, "ApplyGradientDescent")).hasSize(8);
    assertThat(ofType(sgd, "VariableV2")).hasSize(8);
    opts.put("momentum", "1");
    assertThatThrownBy(() -> lenet.build(BATCH, opts))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("momentum")
        .hasMessageContaining("[0.0, 1.0)");
    // 28 x 28 x 1 in, two pools: 7 x 7 x 64 features into the dense layer
    TrainingGraph full = lenet.build(2, Map.of());
    assertThat(full.manifest().feeds().get(0).shape()).containsExactly(2, 28, 28, 1);
    NodeDef kernel = full.graphDef().getNodeList().stream()
        .filter(n -> n.getName().equals("lenet/dense/kernel")).findFirst().orElseThrow();
    assertThat(kernel.getAttrOrThrow("shape").getShape().getDimList())
        .extracting(d -> d.getSize()).containsExactly(7L * 7 * 64, 1024L);
  }

  @Test
  void unet3dWithValidPaddingCropsTheSkipsAndShrinksTheOutput() {
    // side 20, 2 levels: 20 -> 18 -> 16 (skip), pool 8 -> 6 -> 4, up 8, skip cropped 16 -> 8,
    // 8 -> 6 -> 4: labels are 4 x 4 x 4 voxels
    TrainingGraph tg = ModelZoo.getOrThrow("unet3d").build(2, Map.of("side", "20", "levels", "2",
        "width", "2", "padding", "valid"));
    assertThat(tg.manifest().feeds().get(1).shape()).containsExactly(2, 4, 4, 4, 3);
    assertThat(ofType(tg.graphDef(), "Slice")).extracting(NodeDef::getName)
        .contains("unet3d/up0/crop");
    float[] losses = train(tg, 2);
    assertThat(losses[0]).isFinite();
    assertThat(losses[1]).isFinite().isNotEqualTo(losses[0]);
    assertThatThrownBy(() -> ModelZoo.getOrThrow("unet3d").build(1, Map.of("side", "21",
        "levels", "2", "padding", "valid"))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("even");
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
    assertThat(Set.of("normal", "onehot", "uniform")).contains(f.fill());
    long[] shape = f.shape();
    float[] data = new float[Math.toIntExact(f.elements())];
    if (f.fill().equals("normal")) {
      for (int i = 0; i < data.length; i++) {
        data[i] = (float) random.nextGaussian();
      }
    } else if (f.fill().equals("uniform")) {
      for (int i = 0; i < data.length; i++) {
        data[i] = random.nextFloat();
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
