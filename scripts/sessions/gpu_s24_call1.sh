#!/usr/bin/env bash
# Session 24, call 1: prepared launches for DecomposeK, persistent_tma and every pad+ choice
# (kernels.prepare_choice, kernels.relaunch): their GPU tests, compute-sanitizer memcheck on the
# prepared paths, then eager and device time generic vs prepared (scripts/bench_prepared.py).
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 200 python3 -m pytest -q -n 8 -m gpu tests/test_gpu.py -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|Error|passed|failed" $OUT/gpu_tests.txt | tail -12
timeout 150 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py prepared,decompose_k > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -v "^=========$" $OUT/sanitize.log | tail -12
timeout 200 python3 scripts/bench_prepared.py --out $OUT > $OUT/bench_prepared.log 2>&1
echo "bench rc=$?"; tail -16 $OUT/bench_prepared.log
