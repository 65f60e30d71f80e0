package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.NdArrays;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.op.Ops;
import org.tensorflow.op.train.Restore;
import org.tensorflow.types.TString;
import org.tensorflow.types.family.TType;

/** The tf backend: the shared contract, plus interoperability with TensorFlow's own format. */
class TfBackendTest extends CheckpointBackendContractTest {
  @Override
  String backendName() {
    return "tf";
  }

  @Override
  Path dataFile(CheckpointInfo info) {
    return Path.of(info.location() + ".data-00000-of-00001");
  }

  /** The bundle's two files sit where TensorFlow expects them. */
  @Test
  void theBundleHasAnIndexAndOneDataShard() throws IOException {
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      CheckpointInfo saved = Checkpoints.save(s, TestGraphs.names(), 3, Map.of("k", "v"), b);
      assertThat(Path.of(saved.location() + ".index")).exists();
      assertThat(Path.of(saved.location() + ".data-00000-of-00001")).exists();
    }
  }

  @Test
  void tensorflowsOwnRestoreV2ReadsWhatTheBackendWrote() throws IOException {
    List<String> names = TestGraphs.names();
    CheckpointInfo info;
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_a");
      info = Checkpoints.save(s, names, 5, Map.of(), b);
    }
    // an independent graph: RestoreV2(prefix, names, slices, dtypes)
    try (Graph g = new Graph(); Session s = new Session(g)) {
      Ops tf = Ops.create(g);
      List<Class<? extends TType>> types = new ArrayList<>();
      for (String n : names) {
        types.add(((DType) TestGraphs.VARS.get(n)[0]).tensorClass());
      }
      Restore r = tf.train.restore(tf.constant(info.location()),
          tf.constant(NdArrays.vectorOfObjects(names.toArray(new String[0]))),
          tf.constant(NdArrays.vectorOfObjects(names.stream().map(n -> "").toArray(String[]::new))),
          types);
      Session.Runner run = s.runner();
      for (Operand<?> o : r.tensors()) {
        run.fetch(o);
      }
      try (Result res = run.run()) {
        for (int i = 0; i < names.size(); i++) {
          Object[] spec = TestGraphs.VARS.get(names.get(i));
          assertThat(res.get(i).shape().asArray()).isEqualTo((long[]) spec[1]);
          ByteBuffer d = TensorView.of("x", res.get(i)).data();
          byte[] got = new byte[d.remaining()];
          d.get(got);
          assertThat(got).as(names.get(i))
              .isEqualTo(TestGraphs.bytes((DType) spec[0], (long[]) spec[1], 1));
        }
      }
    }
    // TensorFlow's state file names the newest checkpoint
    assertThat(Files.readString(dir.resolve("checkpoint")))
        .startsWith("model_checkpoint_path: \"ckpt-0000000005/model\"");
  }

  @Test
  void theBackendReadsACheckpointWrittenByPlainSaveV2() throws IOException {
    List<String> names = TestGraphs.names();
    String prefix = dir.resolve("model.ckpt-1000").toString();
    try (Graph g = new Graph(); Session s = new Session(g)) {
      Ops tf = Ops.create(g);
      List<Operand<?>> values = new ArrayList<>();
      for (String n : names) {
        DType dt = (DType) TestGraphs.VARS.get(n)[0];
        long[] shape = (long[]) TestGraphs.VARS.get(n)[1];
        values.add(tf.constant(dt.tensorClass(), Shape.of(shape),
            DataBuffers.of(TestGraphs.bytes(dt, shape, 1))));
      }
      tf.withName("save").train.save(tf.constant(prefix),
          tf.constant(NdArrays.vectorOfObjects(names.toArray(new String[0]))),
          tf.constant(NdArrays.vectorOfObjects(names.stream().map(n -> "").toArray(String[]::new))),
          values);
      s.run("save");
    }
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("")) {
      s.run("init_b");
      CheckpointInfo latest = b.latest().orElseThrow();
      assertThat(latest.step()).isEqualTo(1000);
      assertThat(latest.location()).isEqualTo(prefix);
      assertThat(latest.metadata()).containsEntry("source", "tensorflow");
      Checkpoints.load(s, names, latest, b);
      Map<String, byte[]> back = TestGraphs.values(s, names);
      for (String n : names) {
        Object[] spec = TestGraphs.VARS.get(n);
        assertThat(back.get(n)).as(n)
            .isEqualTo(TestGraphs.bytes((DType) spec[0], (long[]) spec[1], 1));
      }
    }
  }

  @Test
  void keepLastNIsListedInTensorFlowsCheckpointFile() throws IOException {
    List<String> names = TestGraphs.names();
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = open("keep=2")) {
      s.run("init_a");
      for (long step = 1; step <= 4; step++) {
        Checkpoints.save(s, names, step, Map.of(), b);
      }
      assertThat(b.list()).extracting(CheckpointInfo::step).containsExactly(3L, 4L);
      assertThat(Files.readAllLines(dir.resolve("checkpoint"), StandardCharsets.UTF_8))
          .containsExactly("model_checkpoint_path: \"ckpt-0000000004/model\"",
              "all_model_checkpoint_paths: \"ckpt-0000000003/model\"",
              "all_model_checkpoint_paths: \"ckpt-0000000004/model\"");
    }
  }
}
