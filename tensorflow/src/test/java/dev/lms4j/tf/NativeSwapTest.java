package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.protobuf.ByteString;
import dev.lms4j.core.plan.SwapParams;
import dev.lms4j.core.plan.SwapPlan;
import dev.lms4j.core.memory.Tier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.proto.AttrValue;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.DataType;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.GraphOptions;
import org.tensorflow.proto.NodeDef;
import org.tensorflow.proto.RewriterConfig;
import org.tensorflow.proto.TensorProto;
import org.tensorflow.proto.TensorShapeProto;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TString;

/**
 * The native swap ops: bit-identical round trips of every dtype and shape through the native
 * host, async and disk ops and the standard ops; identical losses; host memory and swap files
 * released after steps and after a failed step (the library's own counters).
 */
class NativeSwapTest {
  /** Element sizes of the dtypes the native ops take. */
  private static final java.util.Map<DataType, Integer> SIZES = java.util.Map.ofEntries(
      java.util.Map.entry(DataType.DT_FLOAT, 4), java.util.Map.entry(DataType.DT_DOUBLE, 8),
      java.util.Map.entry(DataType.DT_INT32, 4), java.util.Map.entry(DataType.DT_UINT8, 1),
      java.util.Map.entry(DataType.DT_INT16, 2), java.util.Map.entry(DataType.DT_INT8, 1),
      java.util.Map.entry(DataType.DT_COMPLEX64, 8), java.util.Map.entry(DataType.DT_INT64, 8),
      java.util.Map.entry(DataType.DT_BOOL, 1), java.util.Map.entry(DataType.DT_QINT8, 1),
      java.util.Map.entry(DataType.DT_QUINT8, 1), java.util.Map.entry(DataType.DT_QINT32, 4),
      java.util.Map.entry(DataType.DT_BFLOAT16, 2), java.util.Map.entry(DataType.DT_QINT16, 2),
      java.util.Map.entry(DataType.DT_QUINT16, 2), java.util.Map.entry(DataType.DT_UINT16, 2),
      java.util.Map.entry(DataType.DT_COMPLEX128, 16), java.util.Map.entry(DataType.DT_HALF, 2),
      java.util.Map.entry(DataType.DT_UINT32, 4), java.util.Map.entry(DataType.DT_UINT64, 8));

  /** Scalar, empty (two ways), vector, matrix, rank 4 and one > 1 MiB (the mmap'ed path). */
  private static final long[][] SHAPES = {{}, {0}, {3, 0, 2}, {1}, {5, 7}, {2, 3, 4, 5},
      {1100, 300}};

  /**
   * The tests that run the native ops call this. On linux-x86_64 the build fails when gcc cannot
   * make the library, so a library that does not load is a failure here, never a skip; only a
   * build with {@code -Dlms4j.native.skip=true} or another platform skips (and CI's
   * {@code .ci/check-skips} refuses skips).
   */
  static void requireLibrary() {
    boolean loaded = NativeSwap.load();
    String os = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT);
    String arch = System.getProperty("os.arch", "");
    if (Boolean.getBoolean("lms4j.native.skip") || !os.contains("linux")
        || !(arch.equals("amd64") || arch.equals("x86_64"))) {
      assumeTrue(loaded, "native swap library not available: " + NativeSwap.status());
    }
    assertThat(loaded).as("native swap library built for linux-x86_64 must load: %s",
        NativeSwap.status()).isTrue();
  }

  @Test
  void everyNativeDtypeIsCovered() {
    assertThat(SIZES.keySet()).containsExactlyInAnyOrderElementsOf(SwapRewriter.NATIVE_TYPES);
  }

  @Test
  void roundTripsAreBitIdenticalForEveryDtypeAndShape(@TempDir Path dir) {
    requireLibrary();
    GraphDef.Builder gd = GraphDef.newBuilder();
    List<String> fetches = new ArrayList<>();
    Random rnd = new Random(5);
    int n = 0;
    for (DataType dt : SwapRewriter.NATIVE_TYPES) {
      for (long[] shape : SHAPES) {
        String c = "c" + n++;
        gd.addNode(constant(c, dt, shape, rnd));
        // reference: the constant itself, serialized
        serialize(c + "/ref", c, dt).forEach(gd::addNode);
        gd.addNode(node(c + "/out", NativeSwap.SWAP_OUT, dt, c));
        gd.addNode(node(c + "/in", NativeSwap.SWAP_IN, dt, c + "/out"));
        serialize(c + "/native", c + "/in", dt).forEach(gd::addNode);
        gd.addNode(node(c + "/aout", NativeSwap.SWAP_OUT_ASYNC, dt, c));
        gd.addNode(node(c + "/ain", NativeSwap.SWAP_IN, dt, c + "/aout"));
        serialize(c + "/async", c + "/ain", dt).forEach(gd::addNode);
        AttrValue path = AttrValue.newBuilder().setS(ByteString.copyFromUtf8(
            dir.resolve(c).toString())).build();
        gd.addNode(node(c + "/dout", NativeSwap.SWAP_OUT_DISK, dt, c).putAttr("path", path));
        gd.addNode(node(c + "/din", NativeSwap.SWAP_IN_DISK, dt, c + "/dout")
            .putAttr("path", path));
        serialize(c + "/disk", c + "/din", dt).forEach(gd::addNode);
        // the standard ops (SerializeTensor takes no quantized type: their bytes as uint8)
        DataType st = QUANTIZED.contains(dt) ? DataType.DT_UINT8 : dt;
        serialize(c + "/s", c, dt).forEach(gd::addNode);
        gd.addNode(NodeDef.newBuilder().setName(c + "/p").setOp("ParseTensor")
            .addInput(c + "/s").putAttr("out_type", type(st)));
        serialize(c + "/standard", c + "/p", st).forEach(gd::addNode);
        fetches.add(c);
      }
    }
    NativeSwap.Stats before = NativeSwap.stats();
    List<byte[]> results = run(gd.build(), fetches.stream().flatMap(c -> java.util.stream.Stream
        .of(c + "/ref", c + "/native", c + "/async", c + "/disk", c + "/standard")).toList());
    for (int i = 0; i < fetches.size(); i++) {
      byte[] ref = results.get(5 * i);
      for (int k = 1; k < 5; k++) {
        assertThat(results.get(5 * i + k)).as(fetches.get(i) + " path " + k).isEqualTo(ref);
      }
    }
    NativeSwap.Stats after = NativeSwap.stats();
    int cases = fetches.size();
    // host (sync and async) and disk: 3 swap-outs and 3 swap-ins per case
    assertThat(after.swapOuts() - before.swapOuts()).isEqualTo(3L * cases);
    assertThat(after.swapIns() - before.swapIns()).isEqualTo(3L * cases);
    // TensorFlow handed the swap-out's own buffer to the swap-in: no hidden copy
    assertThat(after.swapInsCopiedInput()).isEqualTo(before.swapInsCopiedInput());
    assertThat(after.hostLiveBytes()).isZero();
    assertThat(after.diskLiveFiles()).isZero();
    assertThat(dir.toFile().list()).isEmpty();
  }

  @Test
  void lossesAreIdenticalWithNativeAndStandardSwaps(@TempDir Path dir) {
    requireLibrary();
    TrainingGraph net = TinyNet.build(64, 128, 6);
    SwapParams host = SwapParams.builder().swapoutThreshold(3).swapinAhead(1).swapinGroupby(2)
        .tier(Tier.HOST).build();
    SwapParams disk = host.toBuilder().tier(Tier.DISK).build();
    List<Double> plain = TfTests.losses(net.graphDef(), net.manifest());
    for (SwapPath p : List.of(SwapPath.STANDARD, SwapPath.NATIVE)) {
      for (boolean overlap : List.of(false, true)) {
        LmsResult r = Lms.builder().params(host).swapPath(p).swapOverlap(overlap).build()
            .rewrite(net);
        assertThat(r.plan().swapOuts()).isNotEmpty();
        assertThat(ops(r.graphDef())).contains(p == SwapPath.STANDARD ? "SerializeTensor"
            : overlap ? NativeSwap.SWAP_OUT_ASYNC : NativeSwap.SWAP_OUT);
        assertThat(TfTests.losses(r.graphDef(), net.manifest())).as(p + " overlap " + overlap)
            .containsExactlyElementsOf(plain);
      }
      LmsResult d = Lms.builder().params(disk).swapDir(dir).swapPath(p).build().rewrite(net);
      assertThat(TfTests.losses(d.graphDef(), net.manifest())).as(p + " disk")
          .containsExactlyElementsOf(plain);
    }
    // the native disk tier leaves no file behind
    assertThat(NativeSwap.stats().diskLiveFiles()).isZero();
  }

  @Test
  void hostMemoryAndFilesAreReleasedAfterManyStepsAndAfterAFailedStep(@TempDir Path dir)
      throws InterruptedException {
    requireLibrary();
    NativeSwap.Stats start = NativeSwap.stats();
    assertThat(start.hostLiveBytes()).isZero();
    // x (4 MiB) -> swap-out -> [check: fails on a NaN feed] -> swap-in -> sum; the swap-in
    // waits for the check, so a failing check ends the step with the host copy made and unread
    for (Tier tier : List.of(Tier.HOST, Tier.DISK)) {
      GraphDef gd = failingGraph(tier, dir);
      try (Graph g = new Graph()) {
        g.importGraphDef(gd);
        try (Session s = new Session(g, SessionConfigs.lms())) {
          for (int step = 0; step < 20; step++) {
            try (TFloat32 ok = TFloat32.scalarOf(1f);
                 Result r = s.runner().feed("p", ok).fetch("sum").run()) {
              assertThat(((TFloat32) r.get(0)).getFloat()).isEqualTo(1024f * 1024f);
            }
            assertThat(NativeSwap.stats().hostLiveBytes()).isZero();
          }
          try (TFloat32 nan = TFloat32.scalarOf(Float.NaN)) {
            assertThatThrownBy(() -> s.runner().feed("p", nan).fetch("sum").run())
                .hasMessageContaining("lms4j test check");
          }
          // right after the failed run, with the session still open: the swap-out ran (its
          // host copy was made) and nothing holds it any more
          NativeSwap.Stats failed = NativeSwap.stats();
          assertThat(failed.swapOuts() - start.swapOuts()).as(tier + ": swap-outs ran")
              .isEqualTo(tier == Tier.HOST ? 21 : 42); // 20 good steps and the failed one
          assertThat(failed.hostLiveBytes()).as(tier + ": host bytes, session open").isZero();
          assertThat(failed.hostLiveBuffers()).as(tier + ": host buffers, session open").isZero();
          assertThat(failed.diskLiveFiles()).as(tier + ": swap files, session open").isZero();
          assertThat(dir.toFile().list()).as(tier + ": swap files on disk, session open")
              .isEmpty();
        }
      }
      NativeSwap.Stats end = NativeSwap.stats();
      assertThat(end.hostLiveBytes()).as(tier + ": host bytes after the failed step").isZero();
      assertThat(end.hostLiveBuffers()).isZero();
      assertThat(end.diskLiveFiles()).isZero();
      assertThat(dir.toFile().list()).as("swap files left").isEmpty();
    }
    NativeSwap.Stats end = NativeSwap.stats();
    // the host buffers really were 4 MiB each, outside TensorFlow's allocator
    assertThat(end.hostPeakBytes()).isGreaterThanOrEqualTo(4L << 20);
    // freed mappings were kept for the next step's swap-outs, and are unmapped after 10 s idle
    long deadline = System.nanoTime() + 20_000_000_000L;
    while (NativeSwap.stats().hostCachedBytes() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(250);
    }
    assertThat(NativeSwap.stats().hostCachedBytes()).isZero();
  }

  @Test
  void explicitNativeIsAnErrorOnlyWhenTheLibraryIsMissing() {
    assertThat(SwapPath.NATIVE.resolve(false)).isEqualTo(SwapRewriter.Mechanism.NATIVE);
    assertThat(SwapPath.AUTO.resolve(true)).isEqualTo(SwapRewriter.Mechanism.NATIVE_ASYNC);
    assertThat(SwapPath.STANDARD.resolve(true)).isEqualTo(SwapRewriter.Mechanism.STANDARD);
    assertThat(SwapPath.parse("Native")).isEqualTo(SwapPath.NATIVE);
    assertThatThrownBy(() -> SwapPath.parse("fast")).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void thePlannersCostModelUsesTheBandwidthOfTheActivePath() {
    double standard = dev.lms4j.core.memory.CostModel.defaults().swapBandwidth();
    LmsBuilder b = Lms.builder().budget(1L << 30);
    assertThat(b.swapPath(SwapPath.STANDARD).build().costModel().swapBandwidth())
        .isEqualTo(standard);
    assertThat(b.swapPath(SwapPath.NATIVE).build().costModel().swapBandwidth())
        .isEqualTo(NativeSwap.HOST_BANDWIDTH).isGreaterThan(standard);
    // the disk tier too: the native disk ops' measured round trip, or the standard ops'
    assertThat(b.swapPath(SwapPath.NATIVE).build().costModel().diskBandwidth())
        .isEqualTo(NativeSwap.DISK_BANDWIDTH);
    assertThat(b.swapPath(SwapPath.STANDARD).build().costModel().diskBandwidth())
        .isEqualTo(NativeSwap.STANDARD_DISK_BANDWIDTH)
        .isLessThan(dev.lms4j.core.memory.CostModel.DEFAULT_DISK_BANDWIDTH);
    // a bandwidth the caller measured wins
    assertThat(b.costModel(dev.lms4j.core.memory.CostModel.defaults().withSwapBandwidth(5e9))
        .build().costModel().swapBandwidth()).isEqualTo(5e9);
    assertThat(b.costModel(dev.lms4j.core.memory.CostModel.defaults()
        .withTier(dev.lms4j.core.memory.Tier.DISK, 4e9, 100)).build().costModel().diskBandwidth())
        .isEqualTo(4e9);
  }

  @Test
  void typesTheNativeOpsDoNotTakeFallBackToStandardOps() {
    TrainingGraph net = TinyNet.build(64, 128, 6);
    SwapPlan plan = dev.lms4j.core.plan.TflmsSwapPlanner.plan(GraphImporter.importGraph(
        net.graphDef(), java.util.Map.of(), -1, "gradients", java.util.Set.of("loss",
            "train_op")), SwapParams.builder().swapoutThreshold(3).swapinAhead(1)
        .swapinGroupby(0).build());
    GraphDef out = SwapRewriter.rewrite(net.graphDef(), plan, Tier.DEVICE_PLACEMENT, null, null,
        SwapRewriter.Mechanism.NATIVE);
    // the device-placement tier has no native form: Identity stays
    assertThat(ops(out)).contains("Identity").doesNotContain(NativeSwap.SWAP_OUT);
  }

  /**
   * Without the library (here: {@code LMS4J_NATIVE_SWAP=off} in a fresh JVM) AUTO falls back to
   * the standard ops and says why exactly once.
   */
  @Test
  void withoutTheLibraryAutoFallsBackToStandardOpsAndLogsOnce() throws Exception {
    String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb = new ProcessBuilder(javaBin, "-cp", System.getProperty("java.class.path"),
        NativeSwap.class.getName()).redirectErrorStream(true);
    pb.environment().put(NativeSwap.DISABLE_ENV, "off");
    Process p = pb.start();
    String output = new String(p.getInputStream().readAllBytes(),
        java.nio.charset.StandardCharsets.UTF_8);
    assertThat(p.waitFor()).isZero();
    assertThat(output).contains("swap path auto -> STANDARD");
    assertThat(output.split("native swap library unavailable", -1)).as(output).hasSize(2);
  }

  private static java.util.Set<String> ops(GraphDef gd) {
    java.util.Set<String> s = new java.util.HashSet<>();
    gd.getNodeList().forEach(n -> s.add(n.getOp()));
    return s;
  }

  private static GraphDef failingGraph(Tier tier, Path dir) {
    return failingGraph(tier, NativeSwap.SWAP_OUT, dir);
  }

  /**
   * x (4 MiB of ones) -> swap-out -> [CheckNumerics on the feed p] -> swap-in -> sum: a NaN fed
   * to p fails the step after the swap-out made its host copy and before the swap-in read it.
   * {@code hostSwapOut} is the host tier's swap-out op (sync or async).
   */
  static GraphDef failingGraph(Tier tier, String hostSwapOut, Path dir) {
    DataType f = DataType.DT_FLOAT;
    GraphDef.Builder gd = GraphDef.newBuilder();
    gd.addNode(NodeDef.newBuilder().setName("p").setOp("Placeholder").putAttr("dtype", type(f)));
    gd.addNode(constant("dims", DataType.DT_INT32, new long[] {2}, new byte[] {0, 4, 0, 0, 0, 4,
        0, 0}));
    gd.addNode(constant("one", f, new long[] {}, new byte[] {0, 0, (byte) 0x80, 0x3f}));
    gd.addNode(NodeDef.newBuilder().setName("x").setOp("Fill").addInput("dims").addInput("one")
        .putAttr("T", type(f)).putAttr("index_type", type(DataType.DT_INT32)));
    AttrValue path = AttrValue.newBuilder().setS(ByteString.copyFromUtf8(dir.resolve("x")
        .toString())).build();
    if (tier == Tier.DISK) {
      gd.addNode(node("out", NativeSwap.SWAP_OUT_DISK, f, "x").putAttr("path", path));
    } else {
      gd.addNode(node("out", hostSwapOut, f, "x"));
    }
    gd.addNode(NodeDef.newBuilder().setName("check").setOp("CheckNumerics").addInput("p")
        .addInput("^out").putAttr("T", type(f)).putAttr("message", AttrValue.newBuilder()
            .setS(ByteString.copyFromUtf8("lms4j test check")).build()));
    if (tier == Tier.DISK) {
      gd.addNode(node("in", NativeSwap.SWAP_IN_DISK, f, "out").addInput("^check")
          .putAttr("path", path));
    } else {
      gd.addNode(node("in", NativeSwap.SWAP_IN, f, "out").addInput("^check"));
    }
    gd.addNode(constant("axes", DataType.DT_INT32, new long[] {2}, new byte[] {0, 0, 0, 0, 1, 0,
        0, 0}));
    gd.addNode(NodeDef.newBuilder().setName("sum").setOp("Sum").addInput("in").addInput("axes")
        .putAttr("T", type(f)).putAttr("Tidx", type(DataType.DT_INT32)));
    return gd.build();
  }

  private static List<byte[]> run(GraphDef gd, List<String> fetches) {
    // no constant folding: every round trip runs as written
    ConfigProto cfg = SessionConfigs.lms().toBuilder().setGraphOptions(GraphOptions.newBuilder()
        .setRewriteOptions(RewriterConfig.newBuilder()
            .setConstantFolding(RewriterConfig.Toggle.OFF)
            .setDependencyOptimization(RewriterConfig.Toggle.OFF))).build();
    List<byte[]> out = new ArrayList<>();
    try (Graph g = new Graph()) {
      g.importGraphDef(gd);
      try (Session s = new Session(g, cfg)) {
        Session.Runner r = s.runner();
        fetches.forEach(r::fetch);
        try (Result res = r.run()) {
          for (int i = 0; i < fetches.size(); i++) {
            out.add(((TString) res.get(i)).asBytes().getObject());
          }
        }
      }
    }
    return out;
  }

  private static NodeDef.Builder constant(String name, DataType dt, long[] shape, Random rnd) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    byte[] b = new byte[(int) (n * SIZES.get(dt))];
    rnd.nextBytes(b);
    if (dt == DataType.DT_BOOL) {
      for (int i = 0; i < b.length; i++) {
        b[i] = (byte) (b[i] & 1);
      }
    }
    return constant(name, dt, shape, b);
  }

  private static NodeDef.Builder constant(String name, DataType dt, long[] shape, byte[] b) {
    TensorShapeProto.Builder sh = TensorShapeProto.newBuilder();
    for (long d : shape) {
      sh.addDim(TensorShapeProto.Dim.newBuilder().setSize(d));
    }
    TensorProto t = TensorProto.newBuilder().setDtype(dt).setTensorShape(sh)
        .setTensorContent(ByteString.copyFrom(b)).build();
    return NodeDef.newBuilder().setName(name).setOp("Const").putAttr("dtype", type(dt))
        .putAttr("value", AttrValue.newBuilder().setTensor(t).build());
  }

  private static NodeDef.Builder node(String name, String op, DataType dt, String input) {
    return NodeDef.newBuilder().setName(name).setOp(op).addInput(input).putAttr("T", type(dt));
  }

  /** SerializeTensor takes no quantized types: those are bit-cast to uint8 first. */
  private static final java.util.Set<DataType> QUANTIZED = java.util.Set.of(DataType.DT_QINT8,
      DataType.DT_QUINT8, DataType.DT_QINT16, DataType.DT_QUINT16, DataType.DT_QINT32);

  private static List<NodeDef.Builder> serialize(String name, String input, DataType dt) {
    if (!QUANTIZED.contains(dt)) {
      return List.of(NodeDef.newBuilder().setName(name).setOp("SerializeTensor").addInput(input)
          .putAttr("T", type(dt)));
    }
    return List.of(NodeDef.newBuilder().setName(name + "/bytes").setOp("Bitcast").addInput(input)
        .putAttr("T", type(dt)).putAttr("type", type(DataType.DT_UINT8)),
        NodeDef.newBuilder().setName(name).setOp("SerializeTensor").addInput(name + "/bytes")
        .putAttr("T", type(DataType.DT_UINT8)));
  }

  private static AttrValue type(DataType dt) {
    return AttrValue.newBuilder().setType(dt).build();
  }
}
