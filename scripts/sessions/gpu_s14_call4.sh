#!/usr/bin/env bash
# Session 14, call 4: the GPU test of compiling on meta operands (bench.measure.COMPILE_ON_META),
# then the public suite's prefill and square groups with the retrained H100 ranker and --fast's
# two-family selection. GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu.py -k "meta" > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -5 $OUT/gpu_tests.txt
BENCH_S=${BENCH_S:-420} DEADLINE_S=${DEADLINE_S:-380} BENCH_GROUPS=prefill,square bash scripts/gpu_s14_suite.sh
