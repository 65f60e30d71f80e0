package dev.lms4j.distributed;

import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.TrainingGraph;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;

/**
 * Makes a training graph data-parallel: every gradient an optimizer update reads is replaced by
 * its mean over the workers, computed in the graph by a {@code CollectiveReduceV2} (merge
 * {@code Add}, final {@code Div}, group size = the number of workers) between the gradient and
 * the update, so each worker applies the same averaged gradient to its own copy of the variables.
 * The loss and the manifest's metrics are averaged the same way (the manifest then names the
 * averaged tensors), so every worker reports the job's loss. Every node without a job in its
 * device is placed on this task ({@code /job:worker/replica:0/task:I}).
 *
 * <p>Instance keys are given in the order of the updates' names, the same on every worker (each
 * builds the same graph). A step's collectives carry no {@code timeout_seconds}: TensorFlow
 * starts one watchdog thread per collective call that has one (it sleeps out the timeout even
 * when the collective has finished), so a fast job piled up thousands of threads a second and
 * aborted. A dead or stuck peer instead fails the step through the session's step timeout
 * ({@code operation_timeout_in_ms}, see {@link Cluster#sessionConfig}), which cancels the
 * step's collectives, or through the gRPC error of the lost connection. Only the start-up
 * {@link #BARRIER}, which runs once, has a timeout of its own.
 *
 * <pre>{@code
 * TrainingGraph dp = AllReduceRewriter.rewrite(trainingGraph, cluster);
 * }</pre>
 *
 * <p>Updates known: {@code ApplyGradientDescent}, {@code ApplyMomentum}, {@code ApplyAdam},
 * {@code ApplyRMSProp}, {@code ApplyAdagrad} and their {@code Resource} forms; a graph with
 * another {@code Apply*} op is refused, since its gradient would stay local.
 */
public final class AllReduceRewriter {
  /** The scope of the nodes this rewrite adds (under {@code gradients/} for the gradients). */
  public static final String SCOPE = "lms4j_dp";
  /**
   * A scalar all-reduce with its own (long) timeout that {@link DataParallelTrainer} runs once
   * after the session starts, so that workers that start at different times (JVM start, LMS
   * planning) meet before the first step.
   */
  public static final String BARRIER = SCOPE + "/barrier";
  /** The op type of the collective all-reduce. */
  public static final String OP = "CollectiveReduceV2";
  private static final int GROUP_KEY = 1;

  /** Update op type -> index of its gradient input. */
  private static final Map<String, Integer> GRAD_INPUT = Map.ofEntries(
      Map.entry("ApplyGradientDescent", 2), Map.entry("ResourceApplyGradientDescent", 2),
      Map.entry("ApplyMomentum", 3), Map.entry("ResourceApplyMomentum", 3),
      Map.entry("ApplyKerasMomentum", 3), Map.entry("ResourceApplyKerasMomentum", 3),
      Map.entry("ApplyAdam", 9), Map.entry("ResourceApplyAdam", 9),
      Map.entry("ApplyRMSProp", 7), Map.entry("ResourceApplyRMSProp", 7),
      Map.entry("ApplyAdagrad", 3), Map.entry("ResourceApplyAdagrad", 3),
      Map.entry("ApplyAdagradV2", 4), Map.entry("ResourceApplyAdagradV2", 4));

  private AllReduceRewriter() {}

  /**
   * The data-parallel form of {@code tg} for {@code cluster}'s task, with a start-up barrier
   * that waits up to 300 s.
   *
   * @param tg      the training graph every worker builds (per-worker batch)
   * @param cluster the cluster and this task
   * @return the rewritten graph and its manifest
   * @throws IllegalArgumentException when the graph has no update, an unknown {@code Apply*}
   *                                  op, or was rewritten already
   */
  public static TrainingGraph rewrite(TrainingGraph tg, Cluster cluster) {
    return rewrite(tg, cluster, 300f);
  }

  /**
   * As {@link #rewrite(TrainingGraph, Cluster)}, with the timeout of the start-up barrier
   * ({@link #BARRIER}).
   *
   * @param tg           the training graph every worker builds (per-worker batch)
   * @param cluster      the cluster and this task
   * @param startSeconds how long the start-up barrier waits for the slowest worker, {@code > 0}
   * @return the rewritten graph and its manifest
   */
  public static TrainingGraph rewrite(TrainingGraph tg, Cluster cluster, float startSeconds) {
    Objects.requireNonNull(tg, "training graph");
    Objects.requireNonNull(cluster, "cluster");
    if (!(startSeconds > 0)) {
      throw new IllegalArgumentException("the start-up timeout must be > 0 s, got "
          + startSeconds);
    }
    GraphDef gd = tg.graphDef();
    List<NodeDef> updates = new ArrayList<>();
    for (NodeDef n : gd.getNodeList()) {
      if (n.getOp().equals(OP) || n.getName().startsWith(SCOPE + "/")) {
        throw new IllegalArgumentException("the graph is data-parallel already (it holds "
            + n.getName() + ")");
      }
      if (GRAD_INPUT.containsKey(n.getOp())) {
        updates.add(n);
      } else if (n.getOp().matches("(Resource)?(Sparse)?Apply\\w+")) {
        throw new IllegalArgumentException("update op " + n.getName() + " (" + n.getOp()
            + ") is not supported by data-parallel training; supported: "
            + GRAD_INPUT.keySet().stream().sorted().toList());
      }
    }
    if (updates.isEmpty()) {
      throw new IllegalArgumentException("the graph has no optimizer update (Apply* op): "
          + "nothing to all-reduce");
    }
    updates.sort(Comparator.comparing(NodeDef::getName));
    String device = cluster.device() + "/device:CPU:0";
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      NodeDef.Builder b = n.toBuilder();
      b.setDevice(place(n.getDevice(), cluster));
      nodes.put(n.getName(), b);
    }
    List<NodeDef.Builder> added = new ArrayList<>();
    String groupSize = SCOPE + "/group_size";
    String groupKey = SCOPE + "/group_key";
    added.add(intConst(groupSize, cluster.size(), device));
    added.add(intConst(groupKey, GROUP_KEY, device));
    int instance = 0;
    for (NodeDef u : updates) {
      int idx = GRAD_INPUT.get(u.getOp());
      NodeDef.Builder ub = nodes.get(u.getName());
      String grad = ub.getInput(idx);
      DataType t = u.getAttrOrThrow("T").getType();
      instance++;
      String name = "gradients/" + SCOPE + "/allreduce_" + instance;
      added.add(intConst(SCOPE + "/instance_" + instance, instance, device));
      added.add(reduce(name, grad, t, groupSize, groupKey, SCOPE + "/instance_" + instance,
          0f, device));
      ub.setInput(idx, name);
    }
    Manifest m = tg.manifest();
    List<String> averaged = new ArrayList<>();
    averaged.add(m.loss());
    averaged.addAll(m.metrics().values());
    List<String> names = new ArrayList<>();
    for (String tensor : averaged) {
      instance++;
      String name = SCOPE + "/mean_" + instance;
      added.add(intConst(SCOPE + "/instance_" + instance, instance, device));
      added.add(reduce(name, tensor, DataType.DT_FLOAT, groupSize, groupKey,
          SCOPE + "/instance_" + instance, 0f, device));
      names.add(name + ":0");
    }
    instance++;
    String one = SCOPE + "/barrier_value";
    added.add(NodeDef.newBuilder().setName(one).setOp("Const").setDevice(device)
        .putAttr("dtype", AttrValue.newBuilder().setType(DataType.DT_FLOAT).build())
        .putAttr("value", AttrValue.newBuilder().setTensor(TensorProto.newBuilder()
            .setDtype(DataType.DT_FLOAT).setTensorShape(TensorShapeProto.getDefaultInstance())
            .addFloatVal(1f)).build()));
    added.add(intConst(SCOPE + "/instance_" + instance, instance, device));
    added.add(reduce(BARRIER, one, DataType.DT_FLOAT, groupSize, groupKey,
        SCOPE + "/instance_" + instance, startSeconds, device));
    GraphDef.Builder out = gd.toBuilder().clearNode();
    nodes.values().forEach(out::addNode);
    added.forEach(out::addNode);
    Map<String, String> metrics = new LinkedHashMap<>();
    int k = 1;
    for (String metric : m.metrics().keySet()) {
      metrics.put(metric, names.get(k++));
    }
    Manifest dm = new Manifest(m.feeds(), names.get(0), m.trainOp(), m.init(), metrics);
    return new TrainingGraph(out.build(), dm);
  }

  /**
   * The number of all-reduces {@link #rewrite} adds for the gradients of {@code gd}.
   *
   * @param gd a graph
   * @return the count of known update ops
   */
  public static int gradientCount(GraphDef gd) {
    return (int) gd.getNodeList().stream().filter(n -> GRAD_INPUT.containsKey(n.getOp())).count();
  }

  private static String place(String device, Cluster cluster) {
    if (device.isEmpty()) {
      return cluster.device() + "/device:CPU:0";
    }
    if (device.startsWith("/job:")) {
      return device;
    }
    return cluster.device() + (device.startsWith("/") ? device : "/" + device);
  }

  private static NodeDef.Builder reduce(String name, String input, DataType t, String groupSize,
      String groupKey, String instanceKey, float timeoutSeconds, String device) {
    // timeoutSeconds 0: no timeout and no watchdog thread (see the class comment)
    return NodeDef.newBuilder().setName(name).setOp(OP).setDevice(device).addInput(input)
        .addInput(groupSize).addInput(groupKey).addInput(instanceKey)
        .putAttr("T", AttrValue.newBuilder().setType(t).build())
        .putAttr("merge_op", AttrValue.newBuilder().setS(
            com.google.protobuf.ByteString.copyFromUtf8("Add")).build())
        .putAttr("final_op", AttrValue.newBuilder().setS(
            com.google.protobuf.ByteString.copyFromUtf8("Div")).build())
        .putAttr("communication_hint", AttrValue.newBuilder().setS(
            com.google.protobuf.ByteString.copyFromUtf8("auto")).build())
        .putAttr("timeout_seconds", AttrValue.newBuilder().setF(timeoutSeconds).build())
        .putAttr("Nordering_token", AttrValue.newBuilder().setI(0).build());
  }

  private static NodeDef.Builder intConst(String name, int value, String device) {
    TensorProto v = TensorProto.newBuilder().setDtype(DataType.DT_INT32)
        .setTensorShape(TensorShapeProto.getDefaultInstance()).addIntVal(value).build();
    return NodeDef.newBuilder().setName(name).setOp("Const").setDevice(device)
        .putAttr("dtype", AttrValue.newBuilder().setType(DataType.DT_INT32).build())
        .putAttr("value", AttrValue.newBuilder().setTensor(v).build());
  }
}
