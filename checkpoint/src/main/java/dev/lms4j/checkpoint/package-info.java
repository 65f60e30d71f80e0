/**
 * Checkpointing through pluggable, zero-copy backends chosen by name (TMCI-style).
 *
 * <ul>
 *   <li>SPI: {@link dev.lms4j.checkpoint.CheckpointBackendProvider} (name + parameter string),
 *       found through {@link java.util.ServiceLoader} by
 *       {@link dev.lms4j.checkpoint.CheckpointBackends}, which also loads plugin jars at run
 *       time; {@link dev.lms4j.checkpoint.CheckpointBackend} saves and loads
 *       {@link dev.lms4j.checkpoint.TensorView}s, direct {@code ByteBuffer}s over the tensors'
 *       native memory.</li>
 *   <li>Built-in backends: {@code files} (parallel raw files, CRC32C manifest, fsync, atomic
 *       publication, keep-last-N), {@code tf} (TensorFlow's SaveV2/RestoreV2 bundle format) and
 *       {@code log} (prints each tensor's name, size and address).</li>
 *   <li>{@link dev.lms4j.checkpoint.Checkpoints}: save and restore a session's variables
 *       (optimizer state included by naming it); {@link dev.lms4j.checkpoint.AsyncCheckpointer}:
 *       snapshot, then write in the background.</li>
 * </ul>
 *
 * <pre>{@code
 * try (CheckpointBackend b = CheckpointBackends.open("files", "dir=/tmp/ckpt,keep=3")) {
 *   Checkpoints.save(session, Checkpoints.variables(graph), step, Map.of(), b);
 *   Checkpoints.load(session, Checkpoints.variables(graph), b);
 * }
 * }</pre>
 */
package dev.lms4j.checkpoint;
