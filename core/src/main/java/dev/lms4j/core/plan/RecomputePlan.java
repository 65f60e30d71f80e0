package dev.lms4j.core.plan;

import dev.lms4j.core.graph.OpTypes;
import java.util.List;

/**
 * What to recompute: groups of forward ops cloned for the backward pass, in the style of
 * TensorFlow grappler's memory optimizer. A group's clones read the originals' inputs from
 * outside the group and each other inside it; the listed backward consumers are re-pointed from
 * the originals to the clones; the clones that read nothing inside the group wait for the
 * group's triggers, so they run when the backward pass needs them, not during the forward pass.
 *
 * @param groups the groups, in a deterministic order
 */
public record RecomputePlan(List<Group> groups) {
  public RecomputePlan {
    groups = List.copyOf(groups);
  }

  /** A plan that recomputes nothing. */
  public static RecomputePlan empty() {
    return new RecomputePlan(List.of());
  }

  /** True when nothing is recomputed. */
  public boolean isEmpty() {
    return groups.isEmpty();
  }

  /** Number of cloned ops. */
  public int clonedOps() {
    return groups.stream().mapToInt(gr -> gr.ops().size()).sum();
  }

  /** Bytes of the groups' outputs that no longer need to stay alive. */
  public long bytes() {
    return groups.stream().mapToLong(Group::bytes).sum();
  }

  /** The name of the clone of {@code op} in group {@code group}. */
  public static String cloneName(String group, String op) {
    return OpTypes.LMS_PREFIX + "recompute/" + group + "/" + op;
  }

  /**
   * One recomputed group.
   *
   * @param name     short unique name (used in clone names)
   * @param ops      the original ops, in topological order
   * @param repoints backward consumers re-pointed to the clones
   * @param triggers ops the group's root clones wait for
   * @param bytes    bytes of the group's outputs that no longer need to stay alive
   */
  public record Group(String name, List<String> ops, List<Repoint> repoints,
      List<String> triggers, long bytes) {
    public Group {
      ops = List.copyOf(ops);
      repoints = List.copyOf(repoints);
      triggers = List.copyOf(triggers);
    }
  }

  /**
   * A consumer input to re-point.
   *
   * @param consumer the reading op
   * @param op       the original producer (in the group)
   * @param output   the output index read
   */
  public record Repoint(String consumer, String op, int output) {}
}
