package dev.lms4j.distributed;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.tensorflow.proto.ClusterDef;
import org.tensorflow.proto.ConfigProto;
import org.tensorflow.proto.JobDef;
import org.tensorflow.proto.ServerDef;

/**
 * A data-parallel job's cluster as this task sees it: the {@code host:port} of every worker
 * (task {@code i} is the {@code i}-th) and the index of this task. Task 0 is the chief: it leads
 * the collective group and writes checkpoints. The TensorFlow job is called {@value #JOB}.
 *
 * <pre>{@code
 * Cluster c = Cluster.parse("10.0.0.1:2222,10.0.0.2:2222", 1);   // this machine is task 1
 * Cluster local = Cluster.local(4).withTask(0);                   // 4 free loopback ports
 * }</pre>
 *
 * @param workers the workers' {@code host:port}, in task order; at least one
 * @param task    this task's index
 */
public record Cluster(List<String> workers, int task) {
  /** The TensorFlow job name of the workers. */
  public static final String JOB = "worker";

  /**
   * Checks the values.
   *
   * @param workers the workers' addresses
   * @param task    this task's index
   * @throws IllegalArgumentException on an empty list, a malformed or repeated address, or a
   *                                  task outside the list
   */
  public Cluster {
    workers = List.copyOf(Objects.requireNonNull(workers, "workers"));
    if (workers.isEmpty()) {
      throw new IllegalArgumentException("a cluster needs at least one worker");
    }
    for (String w : workers) {
      checkAddress(w);
    }
    if (workers.stream().distinct().count() != workers.size()) {
      throw new IllegalArgumentException("the cluster names a worker twice: " + workers);
    }
    if (task < 0 || task >= workers.size()) {
      throw new IllegalArgumentException("task " + task + " is not in the cluster of "
          + workers.size() + " workers (tasks 0.." + (workers.size() - 1) + ")");
    }
  }

  /**
   * Parses {@code host:port,host:port,...}.
   *
   * @param spec the workers, comma-separated
   * @param task this task's index
   * @return the cluster
   * @throws IllegalArgumentException on malformed input
   */
  public static Cluster parse(String spec, int task) {
    Objects.requireNonNull(spec, "cluster spec");
    List<String> ws = new ArrayList<>();
    for (String s : spec.split(",", -1)) {
      ws.add(s.trim());
    }
    return new Cluster(ws, task);
  }

  /**
   * {@code n} workers on 127.0.0.1, each on a port that was free when this method looked (the
   * ports are released again; a port taken in between makes that worker's server fail to start,
   * which the job reports), as task 0.
   *
   * @param n the number of workers, at least 1
   * @return the cluster
   */
  public static Cluster local(int n) {
    if (n < 1) {
      throw new IllegalArgumentException("the number of workers must be >= 1, got " + n);
    }
    List<ServerSocket> held = new ArrayList<>();
    List<String> ws = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        held.add(s);
        ws.add("127.0.0.1:" + s.getLocalPort());
      }
    } catch (IOException e) {
      throw new UncheckedIOException("no free loopback port", e);
    } finally {
      for (ServerSocket s : held) {
        try {
          s.close();
        } catch (IOException ignored) {
          // released anyway
        }
      }
    }
    return new Cluster(ws, 0);
  }

  /**
   * The same workers as another task.
   *
   * @param t the task index
   * @return the cluster seen by task {@code t}
   */
  public Cluster withTask(int t) {
    return new Cluster(workers, t);
  }

  /**
   * The number of workers (the collective group size).
   *
   * @return the size
   */
  public int size() {
    return workers.size();
  }

  /**
   * Whether this task is the chief (task 0).
   *
   * @return true for task 0
   */
  public boolean isChief() {
    return task == 0;
  }

  /**
   * This task's device prefix, {@code /job:worker/replica:0/task:I}.
   *
   * @return the device name
   */
  public String device() {
    return taskDevice(task);
  }

  /**
   * The session target of this task's own server, {@code grpc://host:port}.
   *
   * @return the target
   */
  public String target() {
    return "grpc://" + workers.get(task);
  }

  /**
   * The workers as {@code host:port,...}, as {@link #parse} reads them.
   *
   * @return the spec
   */
  public String spec() {
    return String.join(",", workers);
  }

  /**
   * The session config for this task: {@code base} plus the chief as the collective group's
   * leader ({@code ConfigProto.Experimental.collective_group_leader}) and, when
   * {@code timeoutMs > 0}, {@code operation_timeout_in_ms} (a step that waits longer fails).
   * {@code inter_op_parallelism_threads = -1} (run in the caller's thread, as
   * {@code SessionConfigs.lms()} asks) becomes 1: a gRPC server builds its worker's thread pool
   * from this value and aborts the process on -1; one inter-op thread keeps the op order fixed.
   *
   * @param base      the config to extend (e.g. {@code SessionConfigs.lms()})
   * @param timeoutMs the step timeout in milliseconds, 0 for none
   * @return the config
   */
  public ConfigProto sessionConfig(ConfigProto base, long timeoutMs) {
    ConfigProto.Builder b = base.toBuilder();
    if (b.getInterOpParallelismThreads() < 0) {
      b.setInterOpParallelismThreads(1);
    }
    b.setExperimental(b.getExperimental().toBuilder()
        .setCollectiveGroupLeader(taskDevice(0)));
    if (timeoutMs > 0) {
      b.setOperationTimeoutInMs(timeoutMs);
    }
    return b.build();
  }

  /**
   * The {@code ServerDef} of this task's in-process gRPC server.
   *
   * @param sessionConfig the server's default session config (from {@link #sessionConfig})
   * @return the server definition
   */
  public ServerDef serverDef(ConfigProto sessionConfig) {
    JobDef.Builder job = JobDef.newBuilder().setName(JOB);
    for (int i = 0; i < workers.size(); i++) {
      job.putTasks(i, workers.get(i));
    }
    return ServerDef.newBuilder().setCluster(ClusterDef.newBuilder().addJob(job))
        .setJobName(JOB).setTaskIndex(task).setProtocol("grpc")
        .setDefaultSessionConfig(sessionConfig).build();
  }

  private static String taskDevice(int t) {
    return "/job:" + JOB + "/replica:0/task:" + t;
  }

  private static void checkAddress(String w) {
    int colon = w.lastIndexOf(':');
    if (colon <= 0 || colon == w.length() - 1) {
      throw new IllegalArgumentException("a worker address must be host:port, got '" + w + "'");
    }
    String host = w.substring(0, colon);
    if (host.contains(",") || host.isBlank() || host.chars().anyMatch(Character::isWhitespace)) {
      throw new IllegalArgumentException("bad host in worker address '" + w + "'");
    }
    int port;
    try {
      port = Integer.parseInt(w.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("bad port in worker address '" + w + "'");
    }
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException("port out of range in worker address '" + w + "'");
    }
  }
}
