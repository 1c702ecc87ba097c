#!/usr/bin/env bash
# Session 15, call 2: the public suite's prefill and square groups (scripts/gpu_s15_suite.sh), then
# cold one-shape `gemmtune tune --fast` runs against max-autotune (scripts/cold_timeline.sh, modes
# cold and inproc) after the parent stopped importing Triton and the kernel modules.
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
BENCH_S=${BENCH_S:-300} DEADLINE_S=${DEADLINE_S:-260} BENCH_GROUPS=prefill,square bash scripts/gpu_s15_suite.sh
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=${MODES:-"cold inproc"} timeout ${COLD_S:-260} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold rc=$?"; cat $OUT/cold/cold.txt 2>/dev/null; grep -h "import" $OUT/cold/parts.txt 2>/dev/null
tar czf $OUT/cold.tgz -C $OUT cold && rm -rf $OUT/cold
