#!/usr/bin/env bash
# Session 16, call 8: cold one-shape --fast, in a worker (the default) and --in-process (no worker:
# the precompile threads run in the command's own process), against max-autotune; the device's default
# environment (no bytecode cache). GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=${MODES:-"inproc cold"} timeout ${COLD_S:-330} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold rc=$?"; cat $OUT/cold/cold.txt; grep -h "import\|context" $OUT/cold/parts.txt
tar czf $OUT/cold.tgz -C $OUT cold && rm -rf $OUT/cold
