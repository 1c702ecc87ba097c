#!/usr/bin/env bash
# Session 15, call 3: every GPU test (the parent's lazy imports moved each family's pure part to
# kernels/*_spec.py), then cold one-shape `gemmtune tune --fast` against max-autotune with no
# compile workers for runs of <= 4 compiles (tuning.executor.SEQUENTIAL_COMPILES).
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout ${TEST_S:-270} python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -4 $OUT/gpu_tests.txt
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=${MODES:-"cold"} timeout ${COLD_S:-230} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold rc=$?"; cat $OUT/cold/cold.txt 2>/dev/null; grep -h "import" $OUT/cold/parts.txt 2>/dev/null
tar czf $OUT/cold.tgz -C $OUT cold && rm -rf $OUT/cold
