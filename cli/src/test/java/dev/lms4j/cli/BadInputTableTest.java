package dev.lms4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.models.ModelZoo;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.MetaGraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.SavedModel;

/**
 * Bad input across every command, as a table: each case must exit with code 2, print one plain
 * line on stderr ({@code lms4j: ...}, no stack trace) that contains the expected words, print
 * nothing about a plan or a run, and leave every file as it was (none created, none changed).
 * The command line runs in this JVM ({@link CliRun}); nothing here plans or trains.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class BadInputTableTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private Path dir;
  private final Map<String, String> vars = new TreeMap<>();
  private ObjectNode manifest;

  @AfterAll
  void removeFiles() {
    Pipeline.deleteTree(dir);
  }

  @BeforeAll
  void files() throws Exception {
    dir = Files.createTempDirectory("lms4j-badinput");
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(8,
        Map.of("layers", "2", "width", "32", "input", "16"));
    Path pb = dir.resolve("mlp.pb");
    Path mf = dir.resolve("mlp.json");
    tg.write(pb, mf);
    manifest = (ObjectNode) JSON.readTree(mf.toFile());
    var("pb", pb);
    var("mf", mf);
    var("out", dir.resolve("out"));          // never created
    var("file", write("a-file.txt", "not a directory"));
    var("ro", write("read-only.json", "{}"));
    var("subdir", Files.createDirectories(dir.resolve("a-dir")));
    var("trace", write("trace.tsv", "step\top\ttype\tstart\tend\tus\n1\tmlp/x\tMatMul\t0\t1\t"
        + "2.5\n"));

    GraphDef gd = tg.graphDef();
    graph("g-missing-input", gd.toBuilder().addNode(NodeDef.newBuilder().setName("extra")
        .setOp("Identity").addInput("nowhere:0")).build());
    graph("g-missing-control", gd.toBuilder().addNode(NodeDef.newBuilder().setName("extra")
        .setOp("NoOp").addInput("^nowhere")).build());
    NodeDef first = gd.getNode(0);
    graph("g-duplicate", gd.toBuilder().addNode(first).build());
    graph("g-unnamed", gd.toBuilder().addNode(NodeDef.newBuilder().setOp("NoOp")).build());
    graph("g-no-op", gd.toBuilder().addNode(NodeDef.newBuilder().setName("typeless")).build());
    graph("g-unknown-op", gd.toBuilder().addNode(NodeDef.newBuilder().setName("weird")
        .setOp("NoSuchOpType")).build());
    graph("g-bad-port", gd.toBuilder().addNode(NodeDef.newBuilder().setName("extra")
        .setOp("Identity").addInput(first.getName() + ":x")).build());
    graph("g-port-range", gd.toBuilder().addNode(NodeDef.newBuilder().setName("extra")
        .setOp("Identity").addInput(first.getName() + ":9")).build());
    GraphDef.Builder cut = gd.toBuilder();
    int loss = indexOf(gd, opName(manifest.get("loss").asText()));
    cut.removeNode(loss);
    graph("g-loss-removed", cut.build());
    Files.write(dir.resolve("junk.pb"), new byte[] {(byte) 0xff, 0x13, 0x37, 0, 0x42, 9});
    var("g-junk", dir.resolve("junk.pb"));
    var("g-empty", write("empty.pb", ""));
    var("g-json", pb.resolveSibling("mlp.json"));
    var("g-missing", dir.resolve("missing.pb"));
    var("g-dir", Files.createDirectories(dir.resolve("not-a-savedmodel")));
    Path smJunk = Files.createDirectories(dir.resolve("sm-junk"));
    Files.write(smJunk.resolve("saved_model.pb"), new byte[] {(byte) 0xff, 0x01, 0x02});
    var("sm-junk", smJunk);
    Path smEmpty = Files.createDirectories(dir.resolve("sm-empty"));
    Files.write(smEmpty.resolve("saved_model.pb"), SavedModel.newBuilder().addMetaGraphs(
        MetaGraphDef.newBuilder()).build().toByteArray());
    var("sm-empty", smEmpty);
    Path sm = Files.createDirectories(dir.resolve("sm"));
    Files.write(sm.resolve("saved_model.pb"), SavedModel.newBuilder().addMetaGraphs(
        MetaGraphDef.newBuilder().setGraphDef(gd)).build().toByteArray());
    var("sm", sm);

    String x = manifest.get("feeds").get(0).get("name").asText();
    manifestCase("m-feed-missing", m -> feed(m, 0).put("name", "no_such_feed"));
    manifestCase("m-feed-twice", m -> ((ArrayNode) m.get("feeds")).add(feed(m, 0).deepCopy()));
    manifestCase("m-feed-twice-port", m -> {
      ObjectNode c = feed(m, 0).deepCopy();
      c.put("name", x + ":0");
      ((ArrayNode) m.get("feeds")).add(c);
    });
    manifestCase("m-feed-port", m -> feed(m, 0).put("name", x + ":1"));
    manifestCase("m-fraction", m -> ((ArrayNode) feed(m, 0).get("shape")).set(0,
        JSON.getNodeFactory().numberNode(16.5)));
    manifestCase("m-dim-string", m -> ((ArrayNode) feed(m, 0).get("shape")).set(0,
        JSON.getNodeFactory().textNode("8")));
    manifestCase("m-dim-negative", m -> ((ArrayNode) feed(m, 0).get("shape")).set(0,
        JSON.getNodeFactory().numberNode(-8)));
    manifestCase("m-dim-bool", m -> ((ArrayNode) feed(m, 0).get("shape")).set(0,
        JSON.getNodeFactory().booleanNode(true)));
    manifestCase("m-dim-huge", m -> {
      ArrayNode s = (ArrayNode) feed(m, 0).get("shape");
      s.set(0, JSON.getNodeFactory().numberNode(1L << 40));
      s.set(1, JSON.getNodeFactory().numberNode(1L << 40));
    });
    manifestCase("m-shape-missing", m -> feed(m, 0).remove("shape"));
    manifestCase("m-shape-object", m -> feed(m, 0).putObject("shape"));
    manifestCase("m-name-missing", m -> feed(m, 0).remove("name"));
    manifestCase("m-dtype", m -> feed(m, 0).put("dtype", "complex64"));
    manifestCase("m-fill", m -> feed(m, 0).put("fill", "lava"));
    manifestCase("m-feeds-missing", m -> m.remove("feeds"));
    manifestCase("m-feeds-object", m -> m.putObject("feeds"));
    manifestCase("m-loss-port", m -> m.put("loss", opName(m.get("loss").asText()) + ":7"));
    manifestCase("m-loss-port-text", m -> m.put("loss", opName(m.get("loss").asText())
        + ":one"));
    manifestCase("m-loss-port-negative", m -> m.put("loss", opName(m.get("loss").asText())
        + ":-1"));
    manifestCase("m-loss-missing-op", m -> m.put("loss", "no_such_loss:0"));
    manifestCase("m-loss-absent", m -> m.remove("loss"));
    manifestCase("m-train-absent", m -> m.remove("train_op"));
    manifestCase("m-train-missing-op", m -> m.put("train_op", "no_such_train_op"));
    manifestCase("m-train-tensor", m -> m.put("train_op", m.get("train_op").asText() + ":0"));
    manifestCase("m-init-missing-op", m -> m.put("init", "no_such_init"));
    manifestCase("m-init-tensor", m -> m.put("init", "init:0"));
    manifestCase("m-metrics-array", m -> m.putArray("metrics"));
    manifestCase("m-metric-missing", m -> m.putObject("metrics").put("acc", "no_such_metric"));
    manifestCase("m-metric-port", m -> m.putObject("metrics").put("acc",
        opName(m.get("loss").asText()) + ":3"));
    var("m-not-json", write("m-not-json.json", "feeds: x"));
    var("m-array", write("m-array.json", "[1, 2]"));
    var("m-empty", write("m-empty.json", ""));
    var("m-null", write("m-null.json", "null"));
    Files.write(dir.resolve("m-binary.json"), new byte[] {(byte) 0xff, (byte) 0xfe, 0, 1});
    var("m-binary", dir.resolve("m-binary.json"));
    var("m-dir", Files.createDirectories(dir.resolve("manifest-dir")));
    var("m-missing", dir.resolve("no-manifest.json"));
    Files.write(dir.resolve("binary.tsv"), new byte[] {(byte) 0xc3, 0x28, (byte) 0xff, 0x0a});
    var("p-binary", dir.resolve("binary.tsv"));
    var("p-empty", write("empty.tsv", ""));
    var("p-words", write("words.tsv", "this is not a trace\nat all\n"));
  }

  private Path write(String name, String text) throws IOException {
    return Files.writeString(dir.resolve(name), text);
  }

  private void var(String k, Path p) {
    vars.put(k, p.toString());
  }

  private void graph(String k, GraphDef gd) throws IOException {
    Path p = dir.resolve(k + ".pb");
    Files.write(p, gd.toByteArray());
    var(k, p);
  }

  private void manifestCase(String k, Consumer<ObjectNode> change) throws IOException {
    ObjectNode m = manifest.deepCopy();
    change.accept(m);
    var(k, write(k + ".json", JSON.writeValueAsString(m)));
  }

  private static ObjectNode feed(ObjectNode m, int i) {
    return (ObjectNode) m.get("feeds").get(i);
  }

  private static String opName(String t) {
    int c = t.lastIndexOf(':');
    return c < 0 ? t : t.substring(0, c);
  }

  private static int indexOf(GraphDef gd, String name) {
    for (int i = 0; i < gd.getNodeCount(); i++) {
      if (gd.getNode(i).getName().equals(name)) {
        return i;
      }
    }
    throw new AssertionError("no node " + name);
  }

  /** One row: the expected words in the message, then the command line ({KEY} = a file). */
  private static Arguments bad(String words, String... args) {
    return Arguments.of(String.join(" ", args), words, args);
  }

  /** The same bad graph or manifest through analyze, run and rewrite. */
  private static Stream<Arguments> graphCommands(String words, String graph, String manifest) {
    return Stream.of(
        bad(words, "analyze", "--graph", graph, "--manifest", manifest, "--budget", "64MiB",
            "--report", "{subdir}/r.json", "--plot", "{subdir}/p.svg"),
        bad(words, "run", "--graph", graph, "--manifest", manifest, "--budget", "64MiB",
            "--steps", "2", "--report", "{subdir}/r.json"),
        bad(words, "rewrite", "--graph", graph, "--manifest", manifest, "--budget", "64MiB",
            "--out", "{subdir}/out.pb"));
  }

  static Stream<Arguments> cases() {
    List<Stream<Arguments>> s = new ArrayList<>();
    // graphs (with a good manifest)
    s.add(graphCommands("has no node named 'nowhere'", "{g-missing-input}", "{mf}"));
    s.add(graphCommands("has no node named 'nowhere'", "{g-missing-control}", "{mf}"));
    s.add(graphCommands("two nodes named", "{g-duplicate}", "{mf}"));
    s.add(graphCommands("node without a name", "{g-unnamed}", "{mf}"));
    s.add(graphCommands("has no op type", "{g-no-op}", "{mf}"));
    s.add(graphCommands("TensorFlow cannot import the GraphDef", "{g-unknown-op}", "{mf}"));
    s.add(graphCommands("the output index 'x' is not a number", "{g-bad-port}", "{mf}"));
    s.add(graphCommands("TensorFlow cannot import the GraphDef", "{g-port-range}", "{mf}"));
    s.add(graphCommands("has no node named 'loss'", "{g-loss-removed}", "{mf}"));
    s.add(graphCommands("is not a binary GraphDef", "{g-junk}", "{mf}"));
    s.add(graphCommands("holds no GraphDef nodes", "{g-empty}", "{mf}"));
    s.add(graphCommands("mlp.json", "{g-json}", "{mf}"));
    s.add(graphCommands("no such file", "{g-missing}", "{mf}"));
    s.add(graphCommands("without saved_model.pb", "{g-dir}", "{mf}"));
    s.add(graphCommands("is not a SavedModel", "{sm-junk}", "{mf}"));
    s.add(graphCommands("the meta graph holds no nodes", "{sm-empty}", "{mf}"));
    // manifests (with a good graph, and some with the SavedModel form of it)
    String[][] m = {
        {"m-feed-missing", "feed 'no_such_feed' is not in the graph"},
        {"m-feed-twice", "is given twice"},
        {"m-feed-twice-port", "is given twice"},
        {"m-feed-port", "has one output (:0)"},
        {"m-fraction", "shape must hold whole numbers, not 16.5"},
        {"m-dim-string", "shape must hold whole numbers"},
        {"m-dim-negative", "shape dimensions must be >= 0"},
        {"m-dim-bool", "shape must hold whole numbers"},
        {"m-dim-huge", "is too large"},
        {"m-shape-missing", "needs \"shape\""},
        {"m-shape-object", "needs \"shape\""},
        {"m-name-missing", "every feed needs a \"name\""},
        {"m-dtype", "unsupported dtype 'complex64'"},
        {"m-fill", "unknown fill 'lava'"},
        {"m-feeds-missing", "manifest needs \"feeds\""},
        {"m-feeds-object", "manifest needs \"feeds\""},
        {"m-loss-port", ":7': op"},
        {"m-loss-port-text", "the output index 'one' is not a number"},
        {"m-loss-port-negative", "the output index '-1' is not a number"},
        {"m-loss-missing-op", "loss 'no_such_loss:0' is not in the graph"},
        {"m-loss-absent", "manifest needs \"loss\""},
        {"m-train-absent", "manifest needs \"train_op\""},
        {"m-train-missing-op", "train_op 'no_such_train_op' is not in the graph"},
        {"m-train-tensor", "train_op names an op, not a tensor"},
        {"m-init-missing-op", "init 'no_such_init' is not in the graph"},
        {"m-init-tensor", "init names an op, not a tensor"},
        {"m-metrics-array", "\"metrics\" must be an object"},
        {"m-metric-missing", "metric 'acc'"},
        {"m-metric-port", "metric 'acc'"},
        {"m-not-json", "manifest is not valid JSON"},
        {"m-array", "manifest must be a JSON object"},
        {"m-empty", "manifest must be a JSON object"},
        {"m-null", "manifest must be a JSON object"},
        {"m-binary", "is not UTF-8 text"},
        {"m-dir", "is a directory, not a JSON file"},
        {"m-missing", "no such file"},
    };
    // each manifest through one of the three commands in turn (they share one loader)
    for (int i = 0; i < m.length; i++) {
      s.add(graphCommands(m[i][1], "{pb}", "{" + m[i][0] + "}").skip(i % 3).limit(1));
    }
    s.add(Stream.of("m-feed-missing:not in the graph", "m-feed-twice:twice", "m-fraction:16.5",
        "m-loss-port::7", "m-init-missing-op:no_such_init").map(k -> bad(
        k.substring(k.indexOf(':') + 1), "run", "--graph", "{sm}", "--manifest",
        "{" + k.substring(0, k.indexOf(':')) + "}", "--steps", "1")));
    // flags and paths
    String[] mlp = {"--model", "mlp", "--batch", "8", "-o", "layers=2", "-o", "width=32"};
    List<String> commands = List.of("analyze", "run", "train", "rewrite");
    for (int c = 0; c < commands.size(); c++) {
      String cmd = commands.get(c);
      int first = c;
      String[] tail = cmd.equals("rewrite") ? new String[] {"--out", "{subdir}/o.pb"}
          : new String[0];
      // each flag case through two of the four commands in turn
      List<Arguments> flags = List.of(
          bad("cannot parse size 'lots'", cat(cmd, mlp, tail, "--budget", "lots")),
          bad("cannot parse size '-1'", cat(cmd, mlp, tail, "--budget", "-1")),
          bad("out of range", cat(cmd, mlp, tail, "--budget", "0")),
          bad("below 1 MiB", cat(cmd, mlp, tail, "--budget", "1KiB")),
          bad("below 1 MiB", cat(cmd, mlp, tail, "--budget", "1000")),
          bad("cannot parse size '1e30'", cat(cmd, mlp, tail, "--budget", "1e30")),
          bad("cannot parse size '5XB'", cat(cmd, mlp, tail, "--budget", "5XB")),
          bad("unknown model 'nope'", cat(cmd, new String[] {"--model", "nope"}, tail,
              "--budget", "64MiB")),
          // options are checked before a model is built or a graph read (TensorFlow loads
          // there, and its start-up lines would come before the one-line error)
          bad("cannot parse size 'banana'", cat(cmd, new String[] {"--model", "nope"}, tail,
              "--budget", "banana")),
          bad("--mem-ratio", cat(cmd, new String[] {"--graph", "{out}/none.pb", "--manifest",
              "{out}/none.json"}, tail, "--budget", "64MiB", "--mem-ratio", "2")),
          bad("--batch must be >= 1", cat(cmd, new String[] {"--model", "mlp", "--batch", "0"},
              tail, "--budget", "64MiB")),
          bad("'abc'", cat(cmd, new String[] {"--model", "mlp", "--batch", "abc"}, tail,
              "--budget", "64MiB")),
          bad("mode", cat(cmd, mlp, tail, "--budget", "64MiB", "--lms", "magic")),
          bad("--debug-level must be 1 or 2, not 7", cat(cmd, mlp, tail, "--budget", "64MiB",
              "--debug-level", "7")),
          bad("--debug-level must be 1 or 2, not 0", cat(cmd, mlp, tail, "--budget", "64MiB",
              "--debug-level", "0")),
          bad("--swap-dir", cat(cmd, mlp, tail, "--budget", "64MiB", "--tier", "disk",
              "--swap-dir", "{file}")),
          bad("cannot be created", cat(cmd, mlp, tail, "--budget", "64MiB", "--tier", "disk",
              "--swap-dir", "{file}/swap")),
          bad("--profile", cat(cmd, mlp, tail, "--budget", "64MiB", "--profile", "{subdir}")),
          bad("no such file", cat(cmd, mlp, tail, "--budget", "64MiB", "--profile",
              "{out}/t.tsv")),
          bad("is not a trace", cat(cmd, mlp, tail, "--budget", "64MiB", "--profile",
              "{p-binary}")),
          bad("no op times", cat(cmd, mlp, tail, "--budget", "64MiB", "--profile",
              "{p-empty}")),
          bad("no op times", cat(cmd, mlp, tail, "--budget", "64MiB", "--profile",
              "{p-words}")),
          bad("--mem-ratio", cat(cmd, mlp, tail, "--budget", "64MiB", "--mem-ratio", "1.5")),
          bad("--mem-ratio", cat(cmd, mlp, tail, "--budget", "64MiB", "--mem-ratio", "0")),
          bad("tier", cat(cmd, mlp, tail, "--budget", "64MiB", "--tier", "cloud")),
          bad("swap path", cat(cmd, mlp, tail, "--budget", "64MiB", "--swap-path", "teleport")),
          bad("scheduler", cat(cmd, mlp, tail, "--budget", "64MiB", "--scheduler", "chaos")),
          bad("--remat-mode", cat(cmd, mlp, tail, "--budget", "64MiB", "--lms", "remat",
              "--remat-mode", "magic")),
          bad("--small-node-limit", cat(cmd, mlp, tail, "--budget", "64MiB", "--lms", "remat",
              "--remat-mode", "path", "--small-node-limit", "-1")),
          bad("cannot be recomputed", cat(cmd, mlp, tail, "--budget", "64MiB", "--lms", "swap",
              "--recompute", "x")),
          bad("--backward-scope", cat(cmd, mlp, tail, "--budget", "64MiB", "--backward-scope",
              "/")),
          bad("Unknown option: '--frobnicate'", cat(cmd, mlp, tail, "--frobnicate")));
      for (int i = 0; i < flags.size(); i++) {
        if ((i + first) % 4 < 2) {
          s.add(Stream.of(flags.get(i)));
        }
      }
      if (!cmd.equals("rewrite")) {
        s.add(Stream.of(
            bad("cannot write", cat(cmd, mlp, tail, "--budget", "64MiB", "--report",
                "{subdir}")),
            bad("no such directory", cat(cmd, mlp, tail, "--budget", "64MiB", "--report",
                "{out}/deeper/r.json")),
            bad("no such directory", cat(cmd, mlp, tail, "--budget", "64MiB", "--report",
                "{file}/r.json")),
            bad("plot", cat(cmd, mlp, tail, "--budget", "64MiB", "--plot", "{out}/p.gif")),
            bad("plot", cat(cmd, mlp, tail, "--budget", "64MiB", "--plot", "{subdir}"))));
      }
    }
    s.add(Stream.of(
        bad("cannot write", "rewrite", "--model", "mlp", "--budget", "64MiB", "--out",
            "{subdir}"),
        bad("no such directory", "rewrite", "--model", "mlp", "--budget", "64MiB", "--out",
            "{out}/o.pb"),
        bad("no such directory", "rewrite", "--model", "mlp", "--budget", "64MiB", "--out",
            "{file}/o.pb"),
        bad("Missing required option: '--out", "rewrite", "--model", "mlp", "--budget", "64MiB"),
        bad("rewrite needs --budget", "rewrite", "--model", "mlp", "--out", "{subdir}/o.pb"),
        bad("analyze needs --budget", "analyze", "--model", "mlp"),
        bad("analyze needs either --model", "analyze", "--budget", "64MiB"),
        bad("give either --model", "run", "--budget", "64MiB"),
        bad("give either --model", "run", "--model", "mlp", "--graph", "{pb}", "--manifest",
            "{mf}"),
        bad("--graph needs --manifest", "run", "--graph", "{pb}"),
        bad("--steps must be >= 1", "run", "--model", "mlp", "--steps", "0"),
        bad("--steps must be >= 1", "train", "--model", "mlp", "--steps", "-3"),
        bad("'many'", "train", "--model", "mlp", "--steps", "many"),
        bad("--epochs must be >= 1", "train", "--model", "mlp", "--epochs", "0"),
        bad("not both", "train", "--model", "mlp", "--epochs", "1", "--steps", "2"),
        bad("train needs --model", "train", "--budget", "64MiB"),
        bad("--data must be synthetic or fashion-mnist", "train", "--model", "mlp", "--data",
            "imagenet"),
        bad("Fashion-MNIST is not in", "train", "--model", "lenet", "--data", "fashion-mnist",
            "--data-dir", "{subdir}"),
        bad("--synthetic-size must be >= 1", "train", "--model", "mlp", "--epochs", "1",
            "--synthetic-size", "0"),
        bad("--resume needs --checkpoint-dir", "train", "--model", "mlp", "--epochs", "1",
            "--resume"),
        bad("--checkpoint-dir", "train", "--model", "mlp", "--epochs", "1", "--checkpoint-dir",
            "{file}"),
        bad("cannot be created", "train", "--model", "mlp", "--epochs", "1",
            "--checkpoint-dir", "{file}/ckpt"),
        bad("nope", "train", "--model", "mlp", "--epochs", "1", "--checkpoint-dir", "{out}/c",
            "--checkpoint-backend", "nope"),
        bad("--checkpoint-every must be >= 1", "train", "--model", "mlp", "--epochs", "1",
            "--checkpoint-dir", "{out}/c", "--checkpoint-every", "0"),
        bad("--checkpoint-unit must be epochs or batches", "train", "--model", "mlp",
            "--epochs", "1", "--checkpoint-dir", "{out}/c", "--checkpoint-unit", "hours"),
        bad("option", "train", "--model", "mlp", "-o", "colour=blue"),
        bad("layers", "train", "--model", "mlp", "-o", "layers=many"),
        bad("--steps must be >= 1", "demo", "--steps", "0"),
        bad("cannot parse size 'lots'", "demo", "--budget", "lots"),
        bad("below 1 MiB", "demo", "--budget", "1KiB"),
        bad("unknown model 'nope'", "demo", "--model", "nope"),
        bad("unknown corpus family 'nope'", "analyze", "--model", "corpus:nope", "--budget",
            "64MiB"),
        bad("--batch does not apply to corpus:unet", "run", "--model", "corpus:unet",
            "--batch", "4", "--budget", "64MiB"),
        bad("--optimizer does not apply to corpus:unet", "train", "--model", "corpus:unet",
            "--optimizer", "adam", "--budget", "64MiB"),
        bad("-o size must be small, test or bench, not 'huge'", "analyze", "--model",
            "corpus:unet", "-o", "size=huge", "--budget", "64MiB"),
        bad("-o seed must be a whole number", "rewrite", "--model", "corpus:lstm", "-o",
            "seed=x", "--budget", "64MiB", "--out", "{subdir}/o.pb"),
        bad("unknown option colour for corpus:gru", "train", "--model", "corpus:gru", "-o",
            "colour=blue", "--budget", "64MiB"),
        bad("cannot write", "demo", "--report", "{subdir}"),
        bad("--suite must be", "bench", "--suite", "huge", "--out", "{out}/b"),
        bad("--out", "bench", "--suite", "smoke", "--out", "{file}"),
        bad("--batch must be >= 1", "bench", "--suite", "smoke", "--batch", "0", "--out",
            "{out}/b"),
        bad("--model goes with", "bench", "--suite", "native", "--model", "mlp", "--out",
            "{out}/b"),
        bad("unknown model 'nope'", "bench", "--suite", "smoke", "--model", "nope", "--out",
            "{out}/b"),
        bad("--tag goes with the corpus suite", "bench", "--suite", "acceptance", "--tag", "x",
            "--out", "{out}/b"),
        bad("unknown corpus family 'nope'", "bench", "--suite", "fidelity-planners",
            "--families", "nope", "--out", "{out}/b"),
        bad("Unmatched argument", "models", "extra"),
        bad("Unmatched argument", "frobnicate")));
    return s.stream().flatMap(x -> x);
  }

  private static String[] cat(String cmd, String[] a, String[] b, String... c) {
    List<String> l = new ArrayList<>();
    l.add(cmd);
    l.addAll(Arrays.asList(a));
    l.addAll(Arrays.asList(b));
    l.addAll(Arrays.asList(c));
    return l.toArray(String[]::new);
  }

  @Test
  void theTableIsLargeAndCoversEveryCommand() {
    List<Arguments> all = cases().toList();
    assertThat(all).hasSizeGreaterThanOrEqualTo(150);
    assertThat(all.stream().map(a -> ((String[]) a.get()[2])[0]).distinct())
        .contains("analyze", "run", "train", "rewrite", "demo", "bench", "models");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void badInputExits2WithOneLineAndWritesNothing(String label, String words, String[] args)
      throws Exception {
    String[] resolved = Arrays.stream(args).map(this::resolve).toArray(String[]::new);
    Map<String, String> before = snapshot();
    CliRun.Result r = CliRun.exec(resolved);
    assertThat(r.code()).as("exit code; stderr: %s; stdout: %s", r.err(), r.out()).isEqualTo(2);
    List<String> lines = r.err().lines().filter(l -> !l.isBlank()).toList();
    assertThat(lines).as("stderr").hasSize(1);
    assertThat(lines.get(0)).startsWith("lms4j: ").contains(words)
        .doesNotContain("Exception").doesNotContain("\tat ");
    assertThat(r.out()).as("stdout").doesNotContain("predicted peak").doesNotContain("Report:")
        .doesNotContain("Training").doesNotContain("Wrote");
    assertThat(snapshot()).as("files after the run").isEqualTo(before);
  }

  private String resolve(String a) {
    String s = a;
    for (var e : vars.entrySet()) {
      s = s.replace("{" + e.getKey() + "}", e.getValue());
    }
    assertThat(s).as("unresolved placeholder in " + a).doesNotContain("{");
    return s;
  }

  /** Every file under the test directory with its size, time and content hash. */
  private Map<String, String> snapshot() throws IOException {
    Map<String, String> m = new TreeMap<>();
    try (Stream<Path> w = Files.walk(dir)) {
      for (Path p : w.toList()) {
        String v = Files.isDirectory(p) ? "dir"
            : Files.size(p) + "@" + Files.getLastModifiedTime(p).toMillis() + "#"
                + Arrays.hashCode(Files.readAllBytes(p));
        m.put(dir.relativize(p).toString(), v);
      }
    }
    return m;
  }
}
