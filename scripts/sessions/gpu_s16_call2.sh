#!/usr/bin/env bash
# Session 16, call 2: all GPU tests (the precompile test's bad config now one that fails fast),
# then where a cold one-shape tune's seconds go: --in-process under cProfile, and the cold runs.
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout ${TEST_S:-200} python3 -m pytest -q -x -n 4 -o faulthandler_timeout=120 tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=${MODES:-"inprof cold"} SHAPES=${SHAPES:-"2048x6144x4096:bf16 16x6144x4096:bf16 64x64x65536:bf16"} \
  NO_MAT=${NO_MAT:-1} timeout ${COLD_S:-300} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold rc=$?"; cat $OUT/cold/cold.txt 2>/dev/null
tar czf $OUT/cold.tgz -C $OUT cold && rm -rf $OUT/cold
