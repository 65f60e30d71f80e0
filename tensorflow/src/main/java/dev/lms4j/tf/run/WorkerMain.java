package dev.lms4j.tf.run;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.Optional;

/**
 * Entry point of every worker JVM that {@link WorkerProcess} starts: it makes the worker die
 * with its parent, then runs the real main class ({@code args[0]}) with the remaining arguments.
 *
 * <p>Two watches, either of which ends the worker: its standard input is a pipe whose other end
 * only the parent holds, so end-of-file means the parent is gone (however it died, SIGKILL
 * included); and the parent's pid, given as {@code -Dlms4j.parent.pid}, is polled every 500 ms
 * in case the pipe is inherited by someone else. The worker then exits through
 * {@link System#exit} (shutdown hooks run) and is halted if that takes more than 2 s.
 *
 * <pre>{@code
 * java -Dlms4j.parent.pid=1234 -cp ... dev.lms4j.tf.run.WorkerMain dev.lms4j.tf.run.StepWorker a b
 * }</pre>
 */
public final class WorkerMain {
  /** System property holding the parent's pid. */
  public static final String PARENT_PID = "lms4j.parent.pid";
  /** Exit code of a worker whose parent died. */
  public static final int ORPHANED = 143;
  private static final long POLL_MS = 500;
  private static final long HALT_AFTER_MS = 2_000;

  private WorkerMain() {}

  /**
   * Starts the watches and runs {@code args[0]}'s {@code main} with {@code args[1..]}.
   *
   * @param args the main class, then its arguments
   * @throws Throwable what the real main throws
   */
  public static void main(String[] args) throws Throwable {
    if (args.length == 0) {
      System.err.println("usage: WorkerMain MAIN-CLASS [ARGS...]");
      System.exit(2);
    }
    watchStdin(System.in);
    Optional<ProcessHandle> parent = parentHandle();
    parent.ifPresent(WorkerMain::watchParent);
    Method main = Class.forName(args[0]).getMethod("main", String[].class);
    try {
      main.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  private static Optional<ProcessHandle> parentHandle() {
    String pid = System.getProperty(PARENT_PID);
    if (pid != null) {
      try {
        return ProcessHandle.of(Long.parseLong(pid));
      } catch (NumberFormatException e) {
        return Optional.empty();
      }
    }
    return ProcessHandle.current().parent();
  }

  private static void watchStdin(InputStream in) {
    daemon("lms4j-parent-pipe", () -> {
      byte[] buf = new byte[256];
      try {
        while (in.read(buf) >= 0) {
          // the parent writes nothing; any bytes are ignored
        }
      } catch (IOException e) {
        // a broken pipe means the same as end-of-file
      }
      orphaned("its standard input closed");
    });
  }

  private static void watchParent(ProcessHandle parent) {
    daemon("lms4j-parent-poll", () -> {
      while (parent.isAlive()) {
        try {
          Thread.sleep(POLL_MS);
        } catch (InterruptedException e) {
          return;
        }
      }
      orphaned("process " + parent.pid() + " ended");
    });
  }

  private static void orphaned(String why) {
    System.err.println("lms4j worker: the parent process is gone (" + why + "); stopping");
    daemon("lms4j-halt", () -> {
      try {
        Thread.sleep(HALT_AFTER_MS);
      } catch (InterruptedException e) {
        // halt at once
      }
      Runtime.getRuntime().halt(ORPHANED);
    });
    System.exit(ORPHANED);
  }

  private static void daemon(String name, Runnable r) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    t.start();
  }
}
