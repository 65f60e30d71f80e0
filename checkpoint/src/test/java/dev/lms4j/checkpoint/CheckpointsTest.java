package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import dev.lms4j.tf.SlotOffload;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.GraphOperation;
import org.tensorflow.Session;

class CheckpointsTest {
  @TempDir Path dir;

  @Test
  void variablesListsWeightsOptimizerStateAndStepSorted() {
    try (Graph g = TrainNet.build()) {
      assertThat(Checkpoints.variables(g)).containsExactly("global_step", "momentum_w0",
          "momentum_w1", "w0", "w1");
    }
  }

  @Test
  void resumingWithOptimizerStateGivesBitIdenticalLosses() throws IOException {
    try (Graph g = TrainNet.build(); Session s = TrainNet.session(g);
        CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir)) {
      List<String> all = Checkpoints.variables(g);
      s.run("init");
      TrainNet.train(s, 3);
      Checkpoints.save(s, all, 3, Map.of("note", "after 3"), b);
      float[] expected = TrainNet.train(s, 4);

      s.run("init");
      CheckpointInfo c = Checkpoints.load(s, all, b);
      assertThat(c.step()).isEqualTo(3);
      assertThat(TestGraphs.values(s, List.of("global_step")).get("global_step"))
          .isEqualTo(new byte[] {3, 0, 0, 0, 0, 0, 0, 0});
      assertThat(TrainNet.train(s, 4)).containsExactly(expected);

      // without the momentum slots the resumed run differs: the state matters
      s.run("init");
      Checkpoints.load(s, TrainNet.WEIGHTS, c, b);
      float[] weightsOnly = TrainNet.train(s, 4);
      assertThat(weightsOnly[0]).isEqualTo(expected[0]); // same weights, same first loss
      assertThat(weightsOnly).isNotEqualTo(expected);
    }
  }

  /**
   * A graph whose momentum slots LMS keeps on the host between updates ({@link SlotOffload}),
   * and with {@code weights} its weights too, saves them from their host copies and restores them
   * there, under their own names: resuming gives the same losses, and the checkpoint moves
   * between the rewritten graph and the original.
   */
  @ParameterizedTest(name = "weights on the host: {0}")
  @ValueSource(booleans = {false, true})
  void variablesKeptOnTheHostAreSavedAndRestoredUnderTheirNames(boolean weights)
      throws IOException {
    SlotOffload.Result r;
    try (Graph g = TrainNet.build()) {
      r = SlotOffload.rewrite(g.toGraphDef(), java.util.Set.of("loss", "train"), 0, weights);
    }
    assertThat(r.slots()).containsExactlyInAnyOrder("momentum_w0", "momentum_w1");
    assertThat(r.weights()).containsExactlyInAnyOrderElementsOf(
        weights ? TrainNet.WEIGHTS : List.of());
    try (Graph g = new Graph(); Graph original = TrainNet.build();
        Session s = TrainNet.session(g); Session o = TrainNet.session(original);
        CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir)) {
      g.importGraphDef(r.graphDef());
      List<String> all = Checkpoints.variables(g);
      // the host copies are LMS's, not the model's
      assertThat(all).containsExactly("global_step", "momentum_w0", "momentum_w1", "w0", "w1");
      s.run("init");
      o.run("init");
      assertThat(TrainNet.train(s, 3)).containsExactly(TrainNet.train(o, 3));
      Checkpoints.save(s, all, 3, Map.of(), b);
      // each host copy holds its variable as the original holds it after the same steps
      for (String v : weights ? List.of("momentum_w0", "w1") : List.of("momentum_w0")) {
        String value = SlotOffload.valueOf(v);
        assertThat(TestGraphs.values(s, List.of(value)).get(value)).as(v)
            .isEqualTo(TestGraphs.values(o, List.of(v)).get(v));
      }
      CheckpointInfo saved = b.latest().orElseThrow();
      float[] expected = TrainNet.train(s, 4);

      s.run("init");
      Checkpoints.load(s, all, saved, b);
      assertThat(TrainNet.train(s, 4)).containsExactly(expected);

      // into the original graph: the same state, the same losses
      o.run("init");
      Checkpoints.load(o, all, saved, b);
      assertThat(TrainNet.train(o, 4)).containsExactly(expected);

      // without the slots the resumed run differs: they were restored, not left at zero
      s.run("init");
      Checkpoints.load(s, TrainNet.WEIGHTS, saved, b);
      assertThat(TrainNet.train(s, 4)).isNotEqualTo(expected);
    }
  }

  @Test
  void restoreOpsAreAddedOnceToTheRunningSessionsGraph() throws IOException {
    try (Graph g = TrainNet.build(); Session s = TrainNet.session(g);
        CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir)) {
      List<String> all = Checkpoints.variables(g);
      s.run("init");
      Checkpoints.save(s, all, 0, Map.of(), b);
      int before = restoreOps(g).size();
      Checkpoints.load(s, all, b);
      List<String> after1 = restoreOps(g);
      Checkpoints.load(s, all, b);
      List<String> after2 = restoreOps(g);
      assertThat(before).isZero();
      assertThat(after1).hasSize(2 * all.size())
          .contains("lms4j_restore/w0/value", "lms4j_restore/w0/assign",
              "lms4j_restore/momentum_w1/assign");
      assertThat(after2).isEqualTo(after1);
    }
  }

  private static List<String> restoreOps(Graph g) {
    List<String> out = new ArrayList<>();
    for (Iterator<GraphOperation> it = g.operations(); it.hasNext(); ) {
      String n = it.next().name();
      if (n.startsWith(Checkpoints.SCOPE + "/")) {
        out.add(n);
      }
    }
    out.sort(null);
    return out;
  }

  @Test
  void badNamesAndMismatchedShapesAreClearErrors() throws IOException {
    try (Graph g = TrainNet.build(); Session s = TrainNet.session(g);
        CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir)) {
      s.run("init");
      assertThatThrownBy(() -> Checkpoints.save(s, List.of("loss"), b))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("'loss' is not a variable (its op type is Mean");
      assertThatThrownBy(() -> Checkpoints.save(s, List.of("nope"), b))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("no operation named 'nope'");
      assertThatThrownBy(() -> Checkpoints.save(s, List.of("w0", "w0:0"), b))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("listed twice");
      assertThatThrownBy(() -> Checkpoints.load(s, List.of("w0"), b))
          .isInstanceOf(IOException.class).hasMessageContaining("no complete checkpoint");
    }
    // a checkpoint of a graph where "w0" has another shape
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir)) {
      s.run("init_a");
      Checkpoints.save(s, List.of("f32"), 1, Map.of(), b);
    }
    try (Graph g = TrainNet.build(); Session s = TrainNet.session(g);
        CheckpointBackend b = CheckpointBackends.open("files", "dir=" + dir)) {
      CheckpointInfo c = b.latest().orElseThrow();
      CheckpointInfo renamed = new CheckpointInfo(c.step(), c.metadata(),
          List.of(new TensorSpec("w0", DType.FLOAT32, new long[] {3, 5}, 60)), c.location());
      assertThatThrownBy(() -> Checkpoints.load(s, List.of("w0"), renamed, b))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("variable 'w0' is float32[8, 16] but checkpoint")
          .hasMessageContaining("holds float32[3, 5]");
    }
  }
}
