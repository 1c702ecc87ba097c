#!/usr/bin/env bash
# Session 54, call 2 (GPU only; no carry; ~5 min): the final tree. The -m gpu lane (first run after
# s53's PREFETCH_B, and after this session's hunts of normfold/fuse_compile, dispatch, benchmodel/report
# and the one atomic-replace helper), then compute-sanitizer over triton_static and skinny.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
timeout 120 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py triton_static,skinny > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|FAIL|mismatch" $OUT/sanitize.log | tail -4
gzip -f $OUT/gpu_tests.txt $OUT/sanitize.log
echo "call took $(( $(date +%s) - T0 )) s"
