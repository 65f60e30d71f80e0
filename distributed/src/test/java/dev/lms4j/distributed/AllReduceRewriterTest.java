package dev.lms4j.distributed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.data.Batch;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.models.ModelZoo;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.proto.NodeDef;

/** The graph rewrite, the cluster spec and the data shards, without starting servers. */
class AllReduceRewriterTest {

  @Test
  void everyUpdateReadsTheMeanOfItsGradientOverTheWorkers() {
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(8, Map.of("layers", "2", "width", "16"));
    Cluster c = Cluster.parse("127.0.0.1:1000,127.0.0.1:1001,127.0.0.1:1002", 2);
    TrainingGraph dp = AllReduceRewriter.rewrite(tg, c, 7f);
    Map<String, NodeDef> before = byName(tg.graphDef().getNodeList());
    Map<String, NodeDef> after = byName(dp.graphDef().getNodeList());
    // 3 dense layers x (kernel, bias) = 6 updates, each reading its own all-reduce
    int updates = 0;
    Set<Long> keys = new HashSet<>();
    for (NodeDef u : before.values()) {
      if (!u.getOp().equals("ApplyGradientDescent")) {
        continue;
      }
      updates++;
      NodeDef nu = after.get(u.getName());
      NodeDef reduce = after.get(nu.getInput(2));
      assertThat(reduce.getOp()).isEqualTo("CollectiveReduceV2");
      assertThat(reduce.getInput(0)).isEqualTo(u.getInput(2));
      assertThat(reduce.getAttrOrThrow("merge_op").getS().toStringUtf8()).isEqualTo("Add");
      assertThat(reduce.getAttrOrThrow("final_op").getS().toStringUtf8()).isEqualTo("Div");
      // no per-collective timeout: TensorFlow would start a watchdog thread per call
      assertThat(reduce.getAttrOrThrow("timeout_seconds").getF()).isZero();
      assertThat(after.get(reduce.getInput(1)).getAttrOrThrow("value").getTensor().getIntVal(0))
          .isEqualTo(3);
      keys.add((long) after.get(reduce.getInput(3)).getAttrOrThrow("value").getTensor()
          .getIntVal(0));
      // the other inputs are untouched
      for (int i = 0; i < u.getInputCount(); i++) {
        if (i != 2) {
          assertThat(nu.getInput(i)).isEqualTo(u.getInput(i));
        }
      }
    }
    assertThat(updates).isEqualTo(6).isEqualTo(AllReduceRewriter.gradientCount(tg.graphDef()));
    assertThat(keys).hasSize(6);
    // loss and accuracy are averaged too, each under a key of its own; a barrier as well
    NodeDef loss = after.get(dp.manifest().loss().replace(":0", ""));
    assertThat(loss.getOp()).isEqualTo("CollectiveReduceV2");
    assertThat(loss.getInput(0)).isEqualTo(tg.manifest().loss());
    assertThat(after.get(AllReduceRewriter.BARRIER).getAttrOrThrow("timeout_seconds").getF())
        .as("the start-up barrier waits up to the start-up timeout").isEqualTo(7f);
    long reduces = after.values().stream().filter(n -> n.getOp().equals("CollectiveReduceV2"))
        .count();
    assertThat(reduces).isEqualTo(6 + 1 + tg.manifest().metrics().size() + 1);
    // every node placed on this task
    assertThat(after.values()).allSatisfy(n -> assertThat(n.getDevice())
        .startsWith("/job:worker/replica:0/task:2"));
    assertThatThrownBy(() -> AllReduceRewriter.rewrite(dp, c, 7f))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("already");
  }

  @Test
  void theSameGraphGetsTheSameKeysOnEveryTask() {
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(8, Map.of("layers", "1", "width", "8"));
    Cluster c = Cluster.local(2);
    var a = AllReduceRewriter.rewrite(tg, c.withTask(0)).graphDef().getNodeList();
    var b = AllReduceRewriter.rewrite(tg, c.withTask(1)).graphDef().getNodeList();
    assertThat(a).hasSameSizeAs(b);
    for (int i = 0; i < a.size(); i++) {
      assertThat(a.get(i).toBuilder().clearDevice().build())
          .isEqualTo(b.get(i).toBuilder().clearDevice().build());
    }
  }

  @Test
  void clusterSpecsAreChecked() {
    Cluster c = Cluster.parse("10.0.0.1:2222, 10.0.0.2:2222", 1);
    assertThat(c.size()).isEqualTo(2);
    assertThat(c.target()).isEqualTo("grpc://10.0.0.2:2222");
    assertThat(c.isChief()).isFalse();
    assertThat(c.serverDef(c.sessionConfig(dev.lms4j.tf.SessionConfigs.lms(), 5000))
        .getDefaultSessionConfig().getInterOpParallelismThreads()).isEqualTo(1);
    assertThat(c.sessionConfig(dev.lms4j.tf.SessionConfigs.lms(), 5000).getExperimental()
        .getCollectiveGroupLeader()).isEqualTo("/job:worker/replica:0/task:0");
    for (String bad : new String[] {"", "host", "host:", ":80", "h:0", "h:70000", "h:x",
        "a:1,a:1"}) {
      assertThatThrownBy(() -> Cluster.parse(bad, 0)).as(bad)
          .isInstanceOf(IllegalArgumentException.class);
    }
    assertThatThrownBy(() -> Cluster.parse("a:1,b:2", 2))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("task 2");
    Cluster local = Cluster.local(3);
    assertThat(local.workers()).allSatisfy(w -> assertThat(w).startsWith("127.0.0.1:"));
  }

  /** The workers' step-k batches put together are exactly one worker's global batch k. */
  @Test
  void shardsSplitTheSeededGlobalBatches() {
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(4, Map.of("layers", "1", "width", "8"));
    SyntheticDataset all = SyntheticDataset.forManifest(tg.manifest(), 50, 1);
    List<Batch> global = all.batches(12, true, 99);
    List<List<Batch>> shards = new ArrayList<>();
    for (int w = 0; w < 3; w++) {
      ShardedDataset s = new ShardedDataset(all, 3, w, 4);
      assertThat(s.size()).isEqualTo(16);   // 4 full global batches of 12
      shards.add(s.batches(4, true, 99));
    }
    for (int k = 0; k < 4; k++) {
      int[] joined = new int[12];
      for (int w = 0; w < 3; w++) {
        System.arraycopy(shards.get(w).get(k).indices(), 0, joined, 4 * w, 4);
      }
      assertThat(joined).isEqualTo(global.get(k).indices());
    }
    assertThat(shards.get(0)).hasSize(4);   // the partial 5th global batch (2 samples) skipped
    assertThatThrownBy(() -> new ShardedDataset(all, 2, 2, 4))
        .isInstanceOf(IllegalArgumentException.class);
  }

  private static Map<String, NodeDef> byName(List<NodeDef> nodes) {
    Map<String, NodeDef> m = new HashMap<>();
    nodes.forEach(n -> m.put(n.getName(), n));
    return m;
  }
}
