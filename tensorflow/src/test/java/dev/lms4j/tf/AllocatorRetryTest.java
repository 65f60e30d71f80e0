package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.tf.run.AllocatorRetry;
import dev.lms4j.tf.run.WorkerProcess;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operation;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.types.TFloat32;

/**
 * The allocator retry budgeted workers preload ({@link AllocatorRetry}, {@code lms4j_alloc.cc}),
 * in real budgeted worker JVMs:
 *
 * <ul>
 *   <li>an allocation that cannot fit fails without TensorFlow's wait: TensorFlow's own retry
 *       waits until 10 s after the first failed attempt (a deadline, so never less), and the
 *       worker is reported out of memory well before that;</li>
 *   <li>an allocation that fits only once an asynchronous swap-out's copy has released its
 *       device tensor still waits for it: the step trains, with its exact sum, and no allocation
 *       failed for good (the library's own counters, read through the swap library).</li>
 * </ul>
 */
class AllocatorRetryTest {
  /** Floats in the async graph's two large tensors: 24 MiB each, under a 40 MiB budget. */
  private static final int N = 6 << 20;

  /** The worker: {@code fail} or {@code async}. */
  public static final class RetryWorker {
    private RetryWorker() {}

    /** Entry point of the worker JVM. */
    public static void main(String[] args) throws Exception {
      ObjectMapper json = new ObjectMapper();
      if (!NativeSwap.load()) {
        System.out.println(WorkerProcess.PREFIX + json.createObjectNode().put("event", "error")
            .put("message", NativeSwap.status()));
        System.exit(3);
      }
      try (Graph g = new Graph()) {
        Ops tf = Ops.create(g);
        var p = tf.placeholder(TFloat32.class, Placeholder.shape(Shape.scalar()));
        var fetch = args[0].equals("fail")
            // 40 MB under a 10 MiB budget
            ? tf.sum(tf.fill(tf.constant(new long[] {10_000_000}), p), tf.constant(0))
            : asyncStep(g, tf, p);
        try (Session s = new Session(g, SessionConfigs.lms());
             TFloat32 one = TFloat32.scalarOf(1f)) {
          System.out.println(WorkerProcess.PREFIX + "{\"event\":\"start\"}");
          System.out.flush();
          try (Result r = s.runner().feed(p, one).fetch(fetch).run()) {
            NativeSwap.Stats st = NativeSwap.stats();
            ObjectNode done = json.createObjectNode().put("event", "done")
                .put("loss", ((TFloat32) r.get(0)).getFloat())
                .put("waited", st.allocWaitedSuccesses())
                .put("unwaited", st.allocUnwaitedFailures());
            System.out.println(WorkerProcess.PREFIX + done);
          }
        }
      }
      System.exit(0);
    }

    /**
     * a = fill(p) -> async swap-out; then b = fill(2p), which fits only once the copy thread has
     * released a; sum(b) + sum(swap-in).
     */
    private static org.tensorflow.Operand<TFloat32> asyncStep(Graph g, Ops tf,
        org.tensorflow.Operand<TFloat32> p) {
      var dims = tf.constant(new long[] {N});
      var a = tf.fill(dims, p);
      Operation out = g.opBuilder(NativeSwap.SWAP_OUT_ASYNC, "out", tf.scope())
          .addInput(a.asOutput()).build();
      var twoP = tf.math.mul(p, tf.constant(2f));
      Operation b = g.opBuilder("Fill", "b", tf.scope()).addInput(dims.asOutput())
          .addInput(twoP.asOutput()).addControlInput(out).build();
      var sumB = tf.sum(b.<TFloat32>output(0), tf.constant(0));
      Operation in = g.opBuilder(NativeSwap.SWAP_IN, "in", tf.scope()).addInput(out.output(0))
          .addControlInput(sumB.op()).build();
      return tf.math.add(sumB, tf.sum(in.<TFloat32>output(0), tf.constant(0)));
    }
  }

  @Test
  void anAllocationThatCannotFitFailsWithoutTensorFlowsTenSecondWait() throws Exception {
    NativeSwapTest.requireLibrary();
    assertThat(AllocatorRetry.library()).as("the allocator retry library is extracted").isNotNull();
    long[] started = {0};
    WorkerProcess.Outcome o = WorkerProcess.run(RetryWorker.class.getName(), List.of("fail"), 10,
        Duration.ofMinutes(2), n -> {
          if (n.path("event").asText().equals("start")) {
            started[0] = System.nanoTime();
          }
        }, l -> { }, true);
    long ms = (System.nanoTime() - started[0]) / 1_000_000;
    assertThat(o.oom()).as(String.valueOf(o.message())).isTrue();
    assertThat(o.message()).startsWith("ran out of memory trying to allocate 38.15MiB");
    assertThat(started[0]).as("the step started").isPositive();
    // TensorFlow's retry fails the allocation 10 000 ms after its first attempt at the earliest
    assertThat(ms).as("from the step's start to the OOM").isLessThan(8_000);
  }

  @Test
  void anAllocationWaitsWhileAnAsynchronousSwapOutsCopyCanStillFreeMemory() throws Exception {
    NativeSwapTest.requireLibrary();
    List<JsonNode> events = Collections.synchronizedList(new ArrayList<>());
    WorkerProcess.Outcome o = WorkerProcess.run(RetryWorker.class.getName(), List.of("async"),
        40, Duration.ofMinutes(2), events::add, l -> { }, true);
    assertThat(o.oom()).as("24 + 24 MiB under 40 MiB: %s", o.message()).isFalse();
    assertThat(o.exitCode()).as(String.valueOf(o.message())).isZero();
    JsonNode done = events.stream().filter(n -> n.path("event").asText().equals("done"))
        .findFirst().orElseThrow();
    assertThat(done.get("loss").floatValue()).isEqualTo(3f * N);
    assertThat(done.get("unwaited").asLong()).as("preloaded, and nothing failed for good: %s",
        done).isZero();
  }
}
