#!/usr/bin/env bash
# Soak test of crash safety (not run by CI): the fault test of CrashSafetyTest with many more
# kills. A worker JVM saves ~24 MiB checkpoints with the `files` backend in a loop and is killed
# (SIGKILL) at random moments; after every kill each listed checkpoint must load with verified
# CRC32C and content, and the newest must be at least the last save the worker reported.
#
#   checkpoint/soak.sh            # 500 kills (about 10 minutes on 2 cores)
#   checkpoint/soak.sh 2000       # more
#   LMS4J_SOAK_SEED=123 checkpoint/soak.sh 50   # replay a seed printed by an earlier run
#
# Run from anywhere; needs the other modules installed in ~/.m2 (mvn -B install once).
set -euo pipefail
kills="${1:-500}"
cd "$(dirname "$0")/.."
export LMS4J_SOAK_KILLS="$kills"
exec mvn -B -q -pl checkpoint test -Dtest=CrashSafetyTest -Dsurefire.failIfNoSpecifiedTests=false
