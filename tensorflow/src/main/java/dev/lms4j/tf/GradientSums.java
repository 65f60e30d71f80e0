package dev.lms4j.tf;

import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.schedule.AddNChains;
import dev.lms4j.core.graph.Levels;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.proto.GraphDef;

/**
 * Turns large gradient sums into running accumulations: an {@code AddN} of many partial gradients
 * (one per use of a shared weight, e.g. one per step of an unrolled RNN) holds every partial
 * gradient until the last one exists; a chain of pairwise {@code AddV2}s adds each one as it
 * arrives, so each can be freed at once. The chain is built by {@link AddNChains} and written
 * into the GraphDef by {@link AddNRewriter} (its last add keeps the AddN's name, so readers and
 * fetches are unchanged).
 *
 * <pre>{@code
 * GradientSums.Result r = GradientSums.rewrite(trainingGraph, GradientSums.Options.defaults());
 * TrainingGraph chained = new TrainingGraph(r.graphDef(), trainingGraph.manifest());
 * }</pre>
 *
 * <p>Rounding. TensorFlow's CPU {@code AddN} kernel adds its inputs left to right in input order,
 * so a chain in input order ({@link Order#INPUT}, the default) gives bit-identical sums (checked
 * on the corpus' unrolled LSTM and GRU: losses equal to the last bit). One exception TensorFlow
 * imposes: grappler's arithmetic optimizer may rewrite the unmodified graph's AddN (the chain's
 * adds are tagged so that it leaves them alone), and then the reference does not add in input
 * order: on the zoo's gpt2 a loss moves by a few ulps (5.5729570388793945 instead of
 * 5.572957515716553); with arithmetic optimization off both agree bit for bit
 * ({@code GradientSumsRoundingTest}). {@code LmsBuilder.gradientSums(false)} /
 * {@code --no-gradient-sums} turns the rewrite off. {@code Graph.addGradients}
 * lists a node's partial gradients in the order back-propagation produced them, which is the
 * order they arrive in, so the input order already frees each partial at once there.
 * {@link Order#ARRIVAL} adds in the order of the levelled schedule instead, for graphs whose
 * AddN inputs are listed in another order (e.g. built elsewhere); float addition is not
 * associative, so its sums, and from them the losses, may differ in the last bits: opt in only
 * where that is acceptable.
 */
public final class GradientSums {
  private static final Logger LOG = LoggerFactory.getLogger(GradientSums.class);

  private GradientSums() {}

  /** The order a chain adds its inputs in. */
  public enum Order {
    /** The AddN's input order: bit-identical to the AddN (default). */
    INPUT,
    /** The order of the levelled schedule: may change the sum's last bits. */
    ARRIVAL
  }

  /**
   * Which sums to rewrite, and how.
   *
   * @param minInputs the fewest data inputs a rewritten AddN has (at least 3)
   * @param minBytes  the least total bytes of its inputs
   * @param order     the order of the additions
   */
  public record Options(int minInputs, long minBytes, Order order) {
    /** Checks the values. */
    public Options {
      if (minInputs < 3) {
        throw new IllegalArgumentException("minInputs must be >= 3, got " + minInputs);
      }
      if (minBytes < 0) {
        throw new IllegalArgumentException("minBytes must be >= 0");
      }
      Objects.requireNonNull(order);
    }

    /** Sums of 4 or more inputs holding 1 MiB or more together, in input order. */
    public static Options defaults() {
      return new Options(4, 1 << 20, Order.INPUT);
    }
  }

  /**
   * The rewrite's result.
   *
   * @param graphDef the rewritten GraphDef (the input one when nothing was rewritten)
   * @param chains   the sums rewritten, with the order of their additions
   */
  public record Result(GraphDef graphDef, List<AddNChains.Chain> chains) {
    /** Copies the list. */
    public Result {
      chains = List.copyOf(chains);
    }
  }

  /**
   * Rewrites the large sums of a training graph. The graph model is imported with the manifest's
   * feed shapes and keeps only the ops a step runs; the input GraphDef is not changed. A graph
   * lms4j already rewrote is returned unchanged.
   */
  public static Result rewrite(TrainingGraph tg, Options o) {
    DataflowGraph g = GraphImporter.importGraph(tg.graphDef(), tg.manifest().feedShapes(), -1,
        GraphImporter.DEFAULT_BACKWARD_SCOPE, tg.manifest().runOps());
    if (g.isRewritten()) {
      return new Result(tg.graphDef(), List.of());
    }
    List<AddNChains.Chain> chains = chains(g, o);
    GraphDef out = AddNRewriter.rewrite(tg.graphDef(), chains);
    LOG.info("{} gradient sums turned into running accumulations ({} order)", chains.size(),
        o.order().name().toLowerCase(java.util.Locale.ROOT));
    return new Result(out, chains);
  }

  /** The chains {@link #rewrite} applies, on the graph model. */
  public static List<AddNChains.Chain> chains(DataflowGraph g, Options o) {
    Set<String> large = new HashSet<>();
    for (Op op : g.ops()) {
      if (!AddNChains.TYPES.contains(op.type()) || op.inputs().size() < o.minInputs()) {
        continue;
      }
      long bytes = 0;
      for (var in : op.inputs()) {
        Tensor t = g.tensor(in);
        bytes += t.bytes();
      }
      if (bytes >= o.minBytes()) {
        large.add(op.name());
      }
    }
    List<AddNChains.Chain> out = new ArrayList<>();
    for (AddNChains.Chain c : AddNChains.plan(g, Levels.of(g).schedule())) {
      if (!large.contains(c.op())) {
        continue;
      }
      if (o.order() == Order.INPUT) {
        Op op = g.opOrThrow(c.op());
        out.add(new AddNChains.Chain(c.op(), op.inputs().stream().map(g::tensorName)
            .toList()));
      } else {
        out.add(c);
      }
    }
    return out;
  }
}
