#!/usr/bin/env bash
# Session 16, call 3: the precompile GPU test, then a cold --in-process tune under cProfile (the whole
# tune in one profiled process) on two shapes. GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 120 python3 -m pytest -q -x tests/test_gpu.py -k "precompile" > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=${MODES:-"inprof"} SHAPES=${SHAPES:-"2048x6144x4096:bf16 16x6144x4096:bf16"} \
  NO_MAT=1 timeout ${COLD_S:-200} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold rc=$?"; cat $OUT/cold/cold.txt 2>/dev/null
cp $OUT/cold/prof-inproc-*.txt $OUT/ 2>/dev/null
tar czf $OUT/cold.tgz -C $OUT cold && rm -rf $OUT/cold
