package dev.lms4j.cli;

import dev.lms4j.tf.TrainingGraph;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code lms4j rewrite}: write the rewritten GraphDef. */
@Command(name = "rewrite", mixinStandardHelpOptions = true,
    description = "Rewrite an exported training GraphDef for a budget and write the result; "
        + "the manifest stays valid for it.")
final class RewriteCommand implements Callable<Integer> {
  @Option(names = "--graph", required = true, paramLabel = "IN.pb") Path graph;
  @Option(names = "--manifest", required = true, paramLabel = "FILE.json") Path manifest;
  @Option(names = "--out", required = true, paramLabel = "OUT.pb") Path out;
  @Mixin LmsOptions lms;

  @Override
  public Integer call() throws Exception {
    Reports.checkWritable(out);
    if (lms.budget == null) {
      throw new IllegalArgumentException("rewrite needs --budget SIZE");
    }
    TrainingGraph tg = TrainingGraph.load(graph, manifest);
    Pipeline.Outcome o = Pipeline.execute(graph.getFileName().toString(), tg, lms, 0,
        System.out);
    if (o.exitCode() != 0) {
      return o.exitCode();
    }
    Path abs = out.toAbsolutePath();
    Path tmp = abs.resolveSibling(abs.getFileName() + ".tmp");
    Files.write(tmp, o.graph().graphDef().toByteArray());
    Files.move(tmp, abs, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    System.out.println("Wrote " + out + " (" + o.graph().graphDef().getNodeCount() + " nodes)");
    return 0;
  }
}
