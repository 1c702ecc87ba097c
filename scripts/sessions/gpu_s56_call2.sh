#!/usr/bin/env bash
# Session 56, call 2 (GPU only; no carry; ~7 min): the final tree. The -m gpu lane (the worker now starts a task's
# clock when it says warm, capture records mv / out= / in-place GEMMs, the Dispatcher validates its constructor's
# decisions, tiled.py's tl.assume), then compute-sanitizer memcheck over the tiled kernels the assume touches
# (triton_mm, triton_static: odd shapes, offset views, split-K slices) and split-K.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
timeout $(( 520 - $(date +%s) + T0 )) compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py triton_static,triton_mm,splitk > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|FAIL|mismatch" $OUT/sanitize.log | tail -4
gzip -f $OUT/gpu_tests.txt $OUT/sanitize.log
echo "call took $(( $(date +%s) - T0 )) s"
