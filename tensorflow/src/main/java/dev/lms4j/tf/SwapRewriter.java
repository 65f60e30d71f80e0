package dev.lms4j.tf;

import com.google.protobuf.ByteString;
import dev.lms4j.core.graph.OpTypes;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.memory.Tier;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;

/**
 * Applies a {@link SwapPlan} to a GraphDef with standard TensorFlow ops.
 *
 * <ul>
 *   <li>{@link Tier#HOST}: swap-out = {@code SerializeTensor} (its string payload is allocated
 *       outside the device allocator), swap-in = {@code ParseTensor}.</li>
 *   <li>{@link Tier#DISK}: swap-out also writes the payload with {@code WriteFile} to a file
 *       under the swap directory; swap-in = {@code ParseTensor(ReadFile(path))} after the write.
 *       When an anchor op (the train op) is given, each file is truncated once its last swap-in
 *       has read it, and the anchor waits for that.</li>
 *   <li>{@link Tier#DEVICE_PLACEMENT}: TFLMS's GPU form: {@code Identity} on the CPU, then
 *       {@code Identity} back on the consumer's device.</li>
 * </ul>
 *
 * With {@link Mechanism#NATIVE} the host and disk tiers use the native swap ops of {@link
 * NativeSwap} instead (one copy each way; see docs/native-swap.md).
 *
 * <p>Swap-ins wait for their triggers through control edges; consumers are re-pointed to the
 * swap-in. Inserted nodes carry {@code _grappler_do_not_remove = true}. The rewrite is pure: the
 * input GraphDef is not changed.
 */
public final class SwapRewriter {
  /** Device swap-outs go to with {@link Tier#DEVICE_PLACEMENT}. */
  public static final String HOST_DEVICE = "/device:CPU:0";
  /** Device swap-ins go to with {@link Tier#DEVICE_PLACEMENT} when the consumer names none. */
  public static final String DEFAULT_ACCELERATOR = "/device:GPU:0";

  private SwapRewriter() {}

  /** How swap-outs and swap-ins are made. */
  public enum Mechanism {
    /** Standard TensorFlow ops (SerializeTensor / ParseTensor, WriteFile / ReadFile). */
    STANDARD,
    /** The native swap ops ({@link NativeSwap}): one copy each way, in the op's thread. */
    NATIVE,
    /**
     * The native swap ops, swap-outs copying on the library's copy thread while compute goes on
     * (overlap); swap-ins stay synchronous (their consumer reads the result at once).
     */
    NATIVE_ASYNC
  }

  /** Dtypes the native ops take; tensors of other types are swapped with standard ops. */
  static final Set<DataType> NATIVE_TYPES = EnumSet.of(DataType.DT_FLOAT, DataType.DT_DOUBLE,
      DataType.DT_INT32, DataType.DT_UINT8, DataType.DT_INT16, DataType.DT_INT8,
      DataType.DT_COMPLEX64, DataType.DT_INT64, DataType.DT_BOOL, DataType.DT_QINT8,
      DataType.DT_QUINT8, DataType.DT_QINT32, DataType.DT_BFLOAT16, DataType.DT_QINT16,
      DataType.DT_QUINT16, DataType.DT_UINT16, DataType.DT_COMPLEX128, DataType.DT_HALF,
      DataType.DT_UINT32, DataType.DT_UINT64);

  /**
   * As {@link #rewrite(GraphDef, SwapPlan, Tier, Path, String, Mechanism)} with standard ops.
   */
  public static GraphDef rewrite(GraphDef gd, SwapPlan plan, Tier tier, Path swapDir,
      String anchorOp) {
    return rewrite(gd, plan, tier, swapDir, anchorOp, Mechanism.STANDARD);
  }

  /**
   * Rewrites {@code gd}.
   *
   * @param gd       the graph the plan was made for
   * @param plan     the plan
   * @param tier     where swapped tensors go
   * @param swapDir  directory for {@link Tier#DISK} (ignored otherwise)
   * @param anchorOp op that must wait for disk cleanup (the train op), or null for none
   * @param mech     standard or native ops for the host and disk tiers (the native disk
   *                 swap-in deletes nothing itself: the file goes when the swap-out's handle is
   *                 released after its last reader, so no anchor is needed)
   */
  public static GraphDef rewrite(GraphDef gd, SwapPlan plan, Tier tier, Path swapDir,
      String anchorOp, Mechanism mech) {
    if (plan.isEmpty()) {
      return gd;
    }
    Map<String, NodeDef.Builder> nodes = new LinkedHashMap<>();
    for (NodeDef n : gd.getNodeList()) {
      nodes.put(n.getName(), n.toBuilder());
    }
    List<NodeDef.Builder> added = new ArrayList<>();
    List<String> cleanups = new ArrayList<>();
    ControlSources sources = ControlSources.of(nodes);
    for (SwapPlan.SwapOut so : plan.swapOuts()) {
      NodeDef.Builder producer = nodes.get(so.producer());
      if (producer == null) {
        throw new IllegalArgumentException("plan names unknown op " + so.producer());
      }
      DataType dt = GraphImporter.dataType(so.dtype());
      if (mech != Mechanism.STANDARD && tier != Tier.DEVICE_PLACEMENT
          && NATIVE_TYPES.contains(dt)) {
        nativeSwap(so, dt, tier, swapDir, mech, producer.getDevice(), nodes, added, sources);
        continue;
      }
      String src = so.output() == 0 ? so.producer() : so.tensorName();
      String fileWrite = null;
      String path = null;
      switch (tier) {
        case HOST -> added.add(node(so.name(), "SerializeTensor", producer.getDevice(), src)
            .putAttr("T", type(dt)));
        case DEVICE_PLACEMENT -> added.add(node(so.name(), "Identity", HOST_DEVICE, src)
            .putAttr("T", type(dt)));
        case DISK -> {
          added.add(node(so.name(), "SerializeTensor", producer.getDevice(), src)
              .putAttr("T", type(dt)));
          path = swapDir.resolve(fileName(so.name())).toString();
          added.add(stringConst(so.name() + "/path", path));
          fileWrite = so.name() + "/write";
          added.add(node(fileWrite, "WriteFile", "", so.name() + "/path", so.name()));
        }
        default -> throw new IllegalStateException();
      }
      List<String> reads = new ArrayList<>();
      for (SwapPlan.SwapIn si : so.swapIns()) {
        String device = nodes.get(si.consumers().get(0)).getDevice();
        NodeDef.Builder in;
        switch (tier) {
          case HOST -> in = node(si.name(), "ParseTensor", device, so.name())
              .putAttr("out_type", type(dt));
          case DEVICE_PLACEMENT -> in = node(si.name(), "Identity",
              device.isEmpty() ? DEFAULT_ACCELERATOR : device, so.name()).putAttr("T", type(dt));
          case DISK -> {
            String read = si.name() + "/read";
            added.add(node(read, "ReadFile", "", so.name() + "/path").addInput("^" + fileWrite));
            for (String t : si.triggers()) {
              added.get(added.size() - 1).addInput("^" + sources.source(t,
                  Set.copyOf(si.consumers())));
            }
            reads.add(read);
            in = node(si.name(), "ParseTensor", device, read).putAttr("out_type", type(dt));
          }
          default -> throw new IllegalStateException();
        }
        if (tier != Tier.DISK) {
          for (String t : si.triggers()) {
            in.addInput("^" + sources.source(t, Set.copyOf(si.consumers())));
          }
        }
        added.add(in);
        repoint(so, si, nodes);
      }
      for (String c : so.syncConsumers()) {
        addControl(nodes.get(c), so.name());
      }
      if (tier == Tier.DISK && anchorOp != null) {
        String trunc = so.name() + "/truncate";
        String empty = so.name() + "/empty";
        added.add(stringConst(empty, ""));
        NodeDef.Builder t = node(trunc, "WriteFile", "", so.name() + "/path", empty);
        for (String r : reads) {
          t.addInput("^" + r);
        }
        added.add(t);
        cleanups.add(trunc);
      }
    }
    for (SwapPlan.ControlEdge e : plan.controlEdges()) {
      addControl(nodes.get(e.to()), sources.source(e.from(), Set.of(e.to())));
    }
    if (anchorOp != null && !cleanups.isEmpty()) {
      NodeDef.Builder anchor = nodes.get(anchorOp);
      if (anchor == null) {
        throw new IllegalArgumentException("anchor op " + anchorOp + " is not in the graph");
      }
      for (String c : cleanups) {
        addControl(anchor, c);
      }
    }
    GraphDef.Builder out = gd.toBuilder().clearNode();
    for (NodeDef.Builder n : nodes.values()) {
      out.addNode(n);
    }
    for (NodeDef.Builder n : added) {
      n.putAttr("_grappler_do_not_remove", AttrValue.newBuilder().setB(true).build());
      out.addNode(n);
    }
    return out.build();
  }

  /** Adds one swap-out and its swap-ins as native ops and re-points the consumers. */
  private static void nativeSwap(SwapPlan.SwapOut so, DataType dt, Tier tier, Path swapDir,
      Mechanism mech, String device, Map<String, NodeDef.Builder> nodes,
      List<NodeDef.Builder> added, ControlSources sources) {
    String src = so.output() == 0 ? so.producer() : so.tensorName();
    boolean async = mech == Mechanism.NATIVE_ASYNC;
    AttrValue path = null;
    if (tier == Tier.DISK) {
      path = AttrValue.newBuilder().setS(ByteString.copyFromUtf8(
          swapDir.resolve(fileName(so.name())).toString())).build();
      added.add(node(so.name(), NativeSwap.SWAP_OUT_DISK, device, src).putAttr("T", type(dt))
          .putAttr("path", path));
    } else {
      added.add(node(so.name(), async ? NativeSwap.SWAP_OUT_ASYNC : NativeSwap.SWAP_OUT, device,
          src).putAttr("T", type(dt)));
    }
    for (SwapPlan.SwapIn si : so.swapIns()) {
      String inDevice = nodes.get(si.consumers().get(0)).getDevice();
      NodeDef.Builder in;
      if (tier == Tier.DISK) {
        in = node(si.name(), NativeSwap.SWAP_IN_DISK, inDevice, so.name()).putAttr("T", type(dt))
            .putAttr("path", path);
      } else {
        in = node(si.name(), NativeSwap.SWAP_IN, inDevice, so.name()).putAttr("T", type(dt));
      }
      for (String t : si.triggers()) {
        in.addInput("^" + sources.source(t, Set.copyOf(si.consumers())));
      }
      added.add(in);
      repoint(so, si, nodes);
    }
    for (String c : so.syncConsumers()) {
      addControl(nodes.get(c), so.name());
    }
  }

  /** Points the swap-in's consumers at it instead of the swapped tensor. */
  private static void repoint(SwapPlan.SwapOut so, SwapPlan.SwapIn si,
      Map<String, NodeDef.Builder> nodes) {
    for (String c : si.consumers()) {
      NodeDef.Builder cb = nodes.get(c);
      for (int k = 0; k < cb.getInputCount(); k++) {
        String ref = cb.getInput(k);
        if (ref.equals(so.tensorName()) || (so.output() == 0 && ref.equals(so.producer()))) {
          cb.setInput(k, si.name());
        }
      }
    }
  }

  /** True when the GraphDef already holds lms4j swap ops. */
  public static boolean isRewritten(GraphDef gd) {
    for (NodeDef n : gd.getNodeList()) {
      if (n.getName().startsWith(OpTypes.LMS_PREFIX)) {
        return true;
      }
    }
    return false;
  }

  private static void addControl(NodeDef.Builder n, String from) {
    String ref = "^" + from;
    if (!n.getInputList().contains(ref)) {
      n.addInput(ref);
    }
  }

  private static NodeDef.Builder node(String name, String op, String device, String... inputs) {
    NodeDef.Builder b = NodeDef.newBuilder().setName(name).setOp(op).setDevice(device);
    for (String in : inputs) {
      b.addInput(in);
    }
    return b;
  }

  private static NodeDef.Builder stringConst(String name, String value) {
    TensorProto t = TensorProto.newBuilder().setDtype(DataType.DT_STRING)
        .setTensorShape(TensorShapeProto.newBuilder())
        .addStringVal(ByteString.copyFromUtf8(value)).build();
    return node(name, "Const", "").putAttr("dtype", type(DataType.DT_STRING))
        .putAttr("value", AttrValue.newBuilder().setTensor(t).build());
  }

  private static AttrValue type(DataType dt) {
    return AttrValue.newBuilder().setType(dt).build();
  }


  /** A file name for a swap-out: its op name with separators replaced. */
  static String fileName(String swapOutName) {
    return swapOutName.substring(OpTypes.LMS_PREFIX.length()).replaceAll("[^A-Za-z0-9_.-]", "_")
        + ".tensor";
  }
}
