/**
 * Checkpointing through pluggable, zero-copy backends chosen by name (TMCI-style). Nothing is
 * here yet: the backend SPI, the {@code tf}, {@code files} and {@code log} backends and the
 * checkpoint callback come with the training-loop issue. The module exists so the layout and the
 * dependency arrow (cli -> checkpoint -> tensorflow -> core) are in place.
 */
package dev.lms4j.checkpoint;
