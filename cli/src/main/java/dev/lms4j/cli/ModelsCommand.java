package dev.lms4j.cli;

import dev.lms4j.train.corpus.Corpus;
import dev.lms4j.train.models.ModelSpec;
import dev.lms4j.train.models.ModelZoo;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;

/** {@code lms4j models}: list the zoo. */
@Command(name = "models", mixinStandardHelpOptions = true,
    description = "List the models of the zoo with their options and defaults, and the "
        + "graphs of the test corpus (--model corpus:FAMILY).")
final class ModelsCommand implements Callable<Integer> {
  @Override
  public Integer call() {
    for (ModelSpec m : ModelZoo.all()) {
      System.out.printf("%-10s %s%n", m.name(), m.description());
      System.out.printf("           default batch %d; options:", m.defaultBatch());
      m.defaultOptions().forEach((k, v) -> System.out.print(" " + k + "=" + v));
      System.out.println();
    }
    System.out.println();
    System.out.println("The test corpus (--model corpus:FAMILY; options: size=small|test|bench, "
        + "default bench; seed=42):");
    for (Corpus.Family f : Corpus.families()) {
      System.out.printf("corpus:%-19s %s%n", f.label(), f.description());
    }
    return 0;
  }
}
