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
    description = "Rewrite an exported training GraphDef (or a zoo model, --model) for a "
        + "budget and write the result; "
        + "the manifest stays valid for it (with --model, OUT.json is written beside OUT.pb).")
final class RewriteCommand implements Callable<Integer> {
  @Option(names = "--graph", paramLabel = "IN.pb") Path graph;
  @Option(names = "--manifest", paramLabel = "FILE.json") Path manifest;
  @Option(names = "--out", required = true, paramLabel = "OUT.pb") Path out;
  @Mixin ModelArgs modelArgs;
  @Mixin LmsOptions lms;

  @Override
  public Integer call() throws Exception {
    Reports.checkWritable(out);
    if (lms.budget == null) {
      throw new IllegalArgumentException("rewrite needs --budget SIZE");
    }
    lms.validateOptions();
    TrainingGraph tg = modelArgs.buildOrLoad(graph, manifest);
    Pipeline.Outcome o = Pipeline.execute(modelArgs.label(graph), tg, lms, 0,
        System.out);
    if (o.exitCode() != 0) {
      return o.exitCode();
    }
    Path abs = out.toAbsolutePath();
    Path tmp = abs.resolveSibling(abs.getFileName() + ".tmp");
    Files.write(tmp, o.graph().graphDef().toByteArray());
    Files.move(tmp, abs, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    System.out.println("Wrote " + out + " (" + o.graph().graphDef().getNodeCount() + " nodes)");
    if (modelArgs.model != null) {
      // a zoo model has no manifest file yet: write one beside the graph
      String name = abs.getFileName().toString();
      Path json = abs.resolveSibling((name.endsWith(".pb") ? name.substring(0, name.length() - 3)
          : name) + ".json");
      Files.writeString(json, o.graph().manifest().toJson());
      System.out.println("Wrote " + json + " (manifest)");
    }
    return 0;
  }
}
