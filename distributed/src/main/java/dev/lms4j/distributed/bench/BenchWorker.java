package dev.lms4j.distributed.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.lms4j.distributed.Cluster;
import dev.lms4j.distributed.DataParallelTrainer;
import dev.lms4j.tf.SessionConfigs;
import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.tf.run.WorkerProcess;
import dev.lms4j.train.Callback;
import dev.lms4j.train.Logs;
import dev.lms4j.train.data.SyntheticDataset;
import dev.lms4j.train.models.ModelZoo;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tensorflow.Graph;
import org.tensorflow.Server;
import org.tensorflow.Session;
import org.tensorflow.TargetSessions;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;

/**
 * One task of {@link DistributedBench}: {@code train SPEC TASK STEPS BATCH LAYERS WIDTH} trains
 * mlp data-parallel and reports its step times; {@code allreduce SPEC TASK MIB ROUNDS} times a
 * {@code CollectiveReduceV2} of a float tensor of MIB MiB. Results go to stdout as
 * {@code LMS4J <json>} events.
 */
public final class BenchWorker {
  private static final ObjectMapper JSON = new ObjectMapper();

  private BenchWorker() {}

  /**
   * Runs one task.
   *
   * @param args see the class doc
   * @throws Exception on failure (the process exits non-zero)
   */
  public static void main(String[] args) throws Exception {
    Cluster c = Cluster.parse(args[1], Integer.parseInt(args[2]));
    if (args[0].equals("train")) {
      train(c, Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5], args[6]);
    } else {
      allreduce(c, Integer.parseInt(args[3]), Integer.parseInt(args[4]));
    }
    System.out.flush();
    System.exit(0);
  }

  private static void train(Cluster c, int steps, int batch, String layers, String width)
      throws Exception {
    TrainingGraph tg = ModelZoo.getOrThrow("mlp").build(batch,
        Map.of("layers", layers, "width", width));
    SyntheticDataset data = SyntheticDataset.forManifest(tg.manifest(), steps * batch * c.size(),
        42);
    List<Double> ms = new ArrayList<>();
    Callback timer = new Callback() {
      @Override
      public void onBatchEnd(int step, Logs logs) {
        ms.add(logs.samples() / logs.samplesPerSecond() * 1000);
      }
    };
    try (DataParallelTrainer t = new DataParallelTrainer(tg, c)) {
      t.fit(data, 1, timer);
    }
    // step 1 pays graph set-up and the first collectives' group resolution
    double[] rest = ms.subList(Math.min(2, ms.size() - 1), ms.size()).stream()
        .mapToDouble(Double::doubleValue).sorted().toArray();
    double median = rest[rest.length / 2];
    Map<String, Object> ev = new LinkedHashMap<>();
    ev.put("event", "train");
    ev.put("task", c.task());
    ev.put("ms_median", median);
    ev.put("ms", ms);
    ev.put("samples_per_second", batch * 1000.0 / median);
    System.out.println(WorkerProcess.PREFIX + JSON.writeValueAsString(ev));
  }

  private static void allreduce(Cluster c, int mib, int rounds) throws Exception {
    ConfigProto config = c.sessionConfig(SessionConfigs.lms(), 120_000);
    Server server = new Server(c.serverDef(config));
    server.start();
    String dev = c.device() + "/device:CPU:0";
    long n = (long) mib << 18;   // floats
    GraphDef gd = GraphDef.newBuilder()
        .addNode(constant("dims", DataType.DT_INT64, dev, List.of(n), 1))
        .addNode(constant("one", DataType.DT_FLOAT, dev, List.of(), 0))
        .addNode(NodeDef.newBuilder().setName("x").setOp("Fill").setDevice(dev).addInput("dims")
            .addInput("one").putAttr("T", type(DataType.DT_FLOAT))
            .putAttr("index_type", type(DataType.DT_INT64)))
        .addNode(constant("group_size", DataType.DT_INT32, dev, List.of((long) c.size()), 0))
        .addNode(constant("group_key", DataType.DT_INT32, dev, List.of(1L), 0))
        .addNode(constant("instance_key", DataType.DT_INT32, dev, List.of(1L), 0))
        .addNode(NodeDef.newBuilder().setName("reduce").setOp("CollectiveReduceV2").setDevice(dev)
            .addInput("x").addInput("group_size").addInput("group_key").addInput("instance_key")
            .putAttr("T", type(DataType.DT_FLOAT)).putAttr("merge_op", str("Add"))
            .putAttr("final_op", str("Div")).putAttr("communication_hint", str("auto"))
            .putAttr("timeout_seconds", AttrValue.newBuilder().setF(120f).build())
            .putAttr("Nordering_token", AttrValue.newBuilder().setI(0).build()))
        .addNode(NodeDef.newBuilder().setName("fill_only").setOp("Identity").setDevice(dev)
            .addInput("x").putAttr("T", type(DataType.DT_FLOAT)))
        .build();
    double[] reduceMs = new double[rounds];
    double[] fillMs = new double[rounds];
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      try (Session s = TargetSessions.open(g, c.target(), config)) {
        for (int r = -2; r < rounds; r++) {
          long t0 = System.nanoTime();
          s.runner().addTarget("reduce").run();
          long t1 = System.nanoTime();
          s.runner().addTarget("fill_only").run();
          long t2 = System.nanoTime();
          if (r >= 0) {
            reduceMs[r] = (t1 - t0) / 1e6;
            fillMs[r] = (t2 - t1) / 1e6;
          }
        }
      }
    }
    Arrays.sort(reduceMs);
    Arrays.sort(fillMs);
    Map<String, Object> ev = new LinkedHashMap<>();
    ev.put("event", "allreduce");
    ev.put("task", c.task());
    ev.put("mib", mib);
    ev.put("ms_median", reduceMs[rounds / 2]);
    ev.put("fill_ms_median", fillMs[rounds / 2]);
    System.out.println(WorkerProcess.PREFIX + JSON.writeValueAsString(ev));
  }

  private static NodeDef constant(String name, DataType t, String dev, List<Long> values,
      int rank) {
    TensorProto.Builder v = TensorProto.newBuilder().setDtype(t);
    TensorShapeProto.Builder shape = TensorShapeProto.newBuilder();
    if (rank == 1) {
      shape.addDim(TensorShapeProto.Dim.newBuilder().setSize(values.size()));
    }
    v.setTensorShape(shape);
    for (long x : values) {
      switch (t) {
        case DT_INT64 -> v.addInt64Val(x);
        case DT_INT32 -> v.addIntVal((int) x);
        default -> v.addFloatVal(x);
      }
    }
    if (t == DataType.DT_FLOAT && values.isEmpty()) {
      v.addFloatVal(1f);
    }
    return NodeDef.newBuilder().setName(name).setOp("Const").setDevice(dev)
        .putAttr("dtype", type(t)).putAttr("value", AttrValue.newBuilder().setTensor(v).build())
        .build();
  }

  private static AttrValue type(DataType t) {
    return AttrValue.newBuilder().setType(t).build();
  }

  private static AttrValue str(String s) {
    return AttrValue.newBuilder().setS(com.google.protobuf.ByteString.copyFromUtf8(s)).build();
  }
}
