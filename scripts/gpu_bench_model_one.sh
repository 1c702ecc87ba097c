#!/usr/bin/env bash
# One model through gpu_bench_model.sh in a one-GPU device call (carry .whl: lightgbm for the
# ranker), results under $OUT/$1: MODEL_DIR=$1, MODELS, PHASES, MODES (and TUNE, PROFILE) as there.
# Session 12's calls 5, 8 and 9 are this with their settings (gpu_s12_call{5,8,9}.sh).
set -u
source scripts/device_env.sh
record_env transformers lightgbm
dir=$OUT/$1; mkdir -p $dir
OUT=$dir timeout ${BENCH_S:-540} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "$1 rc=$?"; grep -E "^$MODELS|rror|interleaved" $dir/bench-model.log | grep -v "^E11" | tail -12
rm -f $dir/bench-model.md
grep -v "^E11" $dir/bench-model.log | gzip > $dir/bench-model.log.gz && rm $dir/bench-model.log
