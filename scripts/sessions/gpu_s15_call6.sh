#!/usr/bin/env bash
# Session 15, call 6: cold one-shape `gemmtune tune --fast` against max-autotune after the command
# leaves a finished tune without the interpreter's teardown (gemmtune_entry.run).
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=${MODES:-"cold"} timeout ${COLD_S:-300} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold rc=$?"; cat $OUT/cold/cold.txt 2>/dev/null; grep -h "import\|context" $OUT/cold/parts.txt 2>/dev/null
tar czf $OUT/cold.tgz -C $OUT cold && rm -rf $OUT/cold
