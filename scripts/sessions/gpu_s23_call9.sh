#!/usr/bin/env bash
# Session 23, call 9: every GPU-marked test on the final tree (after DecomposeK's spread sum and the
# precompile test's own Triton cache). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 230 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/gpu_tests.txt | tail -5
