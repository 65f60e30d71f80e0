package dev.lms4j.distributed;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.Logs;
import dev.lms4j.train.models.ModelZoo;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.data.Dataset;
import java.util.List;
import java.util.Map;

/** Manual probe: args = spec task batch. */
public final class DpProbe {
  public static void main(String[] a) {
    Cluster c = Cluster.parse(a[0], Integer.parseInt(a[1]));
    int b = Integer.parseInt(a[2]);
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(b, Map.of("layers", "2", "width", "64"));
    Dataset d = SyntheticDataset.forManifest(tg.manifest(), 256, 42);
    try (DataParallelTrainer t = new DataParallelTrainer(tg, c)) {
      List<Logs> h = t.fit(d, 3);
      for (Logs l : h) {
        System.out.println("LOSS " + l.loss());
      }
    }
    System.exit(0);
  }
}
