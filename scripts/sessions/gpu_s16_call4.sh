#!/usr/bin/env bash
# Session 16, call 4: all GPU tests (-n 4), then cold one-shape `gemmtune tune --fast`
# with and without the benchmark worker compiling a shape's candidates together on threads,
# against max-autotune. GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout ${TEST_S:-200} python3 -m pytest -q -x tests/test_gpu.py -n 4 > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=${MODES:-"cold noprecompile"} timeout ${COLD_S:-400} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold rc=$?"; cat $OUT/cold/cold.txt 2>/dev/null; grep -h "import\|context" $OUT/cold/parts.txt 2>/dev/null
tar czf $OUT/cold.tgz -C $OUT cold && rm -rf $OUT/cold
