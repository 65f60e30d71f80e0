package dev.lms4j.cli;

import dev.lms4j.core.plan.PlanningException;
import java.io.PrintWriter;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code lms4j} command line. Exit codes: 0 success, 1 the run failed (e.g. does not fit),
 * 2 bad input (message on stderr, nothing written).
 */
@Command(name = "lms4j", mixinStandardHelpOptions = true, version = "lms4j 0.1.0",
    description = "Large Model Support for TensorFlow Java: rewrites training graphs with "
        + "swap-out / swap-in ops so they train under a device memory budget.",
    subcommands = {TrainCommand.class, RunCommand.class, AnalyzeCommand.class,
        RewriteCommand.class, DemoCommand.class, ModelsCommand.class, BenchCommand.class,
        CommandLine.HelpCommand.class})
public final class Main implements Runnable {
  /** Exit code for bad input. */
  static final int BAD_INPUT = 2;
  /** Exit code for a failed run. */
  static final int FAILED = 1;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public void run() {
    spec.commandLine().usage(spec.commandLine().getOut());
  }

  /** Builds the command line with lms4j's error handling. */
  static CommandLine commandLine() {
    CommandLine cl = new CommandLine(new Main());
    cl.setExecutionExceptionHandler((ex, cmd, parse) -> {
      PrintWriter err = cmd.getErr();
      if (ex instanceof IllegalArgumentException || ex instanceof java.nio.file.NoSuchFileException
          || ex instanceof java.io.FileNotFoundException) {
        err.println("lms4j: " + message(ex));
        return BAD_INPUT;
      }
      if (ex instanceof java.nio.file.AccessDeniedException) {
        err.println("lms4j: permission denied: " + ex.getMessage());
        return BAD_INPUT;
      }
      if (ex instanceof PlanningException) {
        err.println("lms4j: " + ex.getMessage());
        return FAILED;
      }
      if (ex instanceof java.io.IOException || ex instanceof java.io.UncheckedIOException) {
        // a file system failure during the run (disk full, a file removed under us)
        err.println("lms4j: " + ioMessage(ex));
        return FAILED;
      }
      err.println("lms4j: " + ex);
      ex.printStackTrace(err);
      return FAILED;
    });
    cl.setParameterExceptionHandler((ex, args) -> {
      CommandLine cmd = ex.getCommandLine();
      cmd.getErr().println("lms4j: " + ex.getMessage().strip().replace('\n', ' ') + " (see '"
          + cmd.getCommandSpec().qualifiedName() + " --help')");
      return BAD_INPUT;
    });
    return cl;
  }

  private static String ioMessage(Exception ex) {
    Throwable t = ex instanceof java.io.UncheckedIOException u ? u.getCause() : ex;
    String m = t.getMessage();
    if (t instanceof java.nio.file.FileSystemException fs && fs.getReason() != null) {
      m = fs.getFile() + ": " + fs.getReason();
    }
    return "input/output error: " + (m == null ? t.getClass().getSimpleName() : m);
  }

  private static String message(Exception ex) {
    if (ex instanceof java.nio.file.NoSuchFileException) {
      return "no such file: " + ex.getMessage();
    }
    return ex.getMessage();
  }

  /** Runs the command line and exits with its code. */
  public static void main(String[] args) {
    System.exit(commandLine().execute(args));
  }
}
