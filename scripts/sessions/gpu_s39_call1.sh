#!/usr/bin/env bash
# Prepared at the end of session 38 for session 39 (~5 min; GPU only; no carry). Run FIRST.
# 1. Every GPU-marked test on session 38's final tree (bench-model's greedy check on a StaticCache
#    is new: tests/test_benchmodel.py's GPU tests run it).
# 2. compute-sanitizer memcheck over skinny's -pdl GPU tests (every path's chain).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 260 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q -m gpu tests/test_skinny.py \
  -k pdl -p no:cacheprovider > $OUT/sanitizer_pdl.txt 2>&1
echo "compute-sanitizer memcheck (pdl tests) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_pdl.txt | tail -3
