#!/usr/bin/env bash
# Session 15, call 1: the run-off's and the meta compile's GPU tests, then the public suite's
# decode, splitk and odd groups (scripts/gpu_s15_suite.sh). GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu.py -k "meta or runoff" > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -2 $OUT/gpu_tests.txt
BENCH_S=${BENCH_S:-430} DEADLINE_S=${DEADLINE_S:-380} BENCH_GROUPS=${BENCH_GROUPS:-decode,splitk,odd} bash scripts/gpu_s15_suite.sh
