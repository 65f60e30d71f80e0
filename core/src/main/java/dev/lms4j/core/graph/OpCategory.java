package dev.lms4j.core.graph;

/** Which phase of a training step an op belongs to. */
public enum OpCategory {
  /** Forward pass (and anything not recognised as backward or optimizer). */
  FORWARD,
  /** Backward pass: gradient computation. */
  BACKWARD,
  /** Optimizer: variable updates. */
  OPTIMIZER
}
