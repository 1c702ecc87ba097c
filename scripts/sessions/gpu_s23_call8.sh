#!/usr/bin/env bash
# Session 23, call 8: DecomposeK with its sum spread over programs and slices (tiled.sum_blocks):
# every split count again (scripts/exp_decompose_splits.py, as call 7), compute-sanitizer memcheck on
# its launches, the GPU tests of the kernels, then the public splitk group with Inductor.
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 150 python3 scripts/exp_decompose_splits.py --out $OUT/decompose_splits.json > $OUT/decompose_splits.log 2>&1
echo "splits rc=$?"; grep -v Warning $OUT/decompose_splits.log | tail -16
timeout 120 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py decompose_k > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; tail -3 $OUT/sanitize.log
timeout 120 python3 -m pytest -q -n 8 -m gpu tests/test_gpu.py tests/test_kernels.py tests/test_epilogue.py -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -1 $OUT/gpu_tests.txt
BENCH_GROUPS=splitk BENCH_S=250 DEADLINE_S=220 bash scripts/gpu_s15_suite.sh
