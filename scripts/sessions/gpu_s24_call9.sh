#!/usr/bin/env bash
# Session 24, call 9: every GPU-marked test on the final tree (prepared launches for DecomposeK,
# persistent_tma and pad+; pad copies on Triton at every size; descriptor templates with no base),
# then compute-sanitizer memcheck on the pad copies and the prepared paths. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 260 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/gpu_tests.txt | tail -8
timeout 200 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py pad,prepared,persistent_tma > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -v "^=========$" $OUT/sanitize.log | tail -8
