#!/usr/bin/env bash
# Session 25, call 1 (2 GPUs): every GPU-marked test, the review commit's refactored prepared
# paths and the new 2-GPU device-guard test among them; compute-sanitizer memcheck on the
# prepared, pad and DecomposeK paths; the device guard's host cost. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
nvidia-smi -L
timeout 260 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -12
timeout 200 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py prepared,pad,decompose_k > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -v "^=========$" $OUT/sanitize.log | tail -6
timeout 90 python3 scripts/bench_device_guard.py $OUT/device_guard.json 2>&1 | tail -5
