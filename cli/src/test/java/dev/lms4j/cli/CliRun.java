package dev.lms4j.cli;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

/** Runs the command line in this JVM and captures what it prints. */
final class CliRun {
  private CliRun() {}

  /** The exit code and what went to stdout and stderr. */
  record Result(int code, String out, String err) {}

  static Result exec(String... args) {
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    ByteArrayOutputStream e = new ByteArrayOutputStream();
    PrintStream oldOut = System.out;
    PrintStream oldErr = System.err;
    int code;
    try (PrintStream ps = new PrintStream(o, true, StandardCharsets.UTF_8);
        PrintStream es = new PrintStream(e, true, StandardCharsets.UTF_8)) {
      System.setOut(ps);
      System.setErr(es);
      var cl = Main.commandLine();
      cl.setOut(new PrintWriter(ps, true));
      cl.setErr(new PrintWriter(es, true));
      code = cl.execute(args);
    } finally {
      System.setOut(oldOut);
      System.setErr(oldErr);
    }
    return new Result(code, o.toString(StandardCharsets.UTF_8),
        e.toString(StandardCharsets.UTF_8));
  }
}
