#!/usr/bin/env bash
# Session 14, call 7: meta compiling limited to problems of >= 1 GiB of inputs; its GPU test, then
# the public suite's groups (BENCH_GROUPS, default decode,splitk,odd) with the final tree.
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu.py -k "meta" > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -2 $OUT/gpu_tests.txt
BENCH_S=${BENCH_S:-450} DEADLINE_S=${DEADLINE_S:-400} BENCH_GROUPS=${BENCH_GROUPS:-decode,splitk,odd} bash scripts/gpu_s14_suite.sh
