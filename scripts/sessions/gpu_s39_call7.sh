#!/usr/bin/env bash
# Session 39 (~4-5 min; GPU only): skinny's BLOCK_M = 1 2-D path (after exp_gemv_kernel, call 6).
# 1. tests/test_skinny.py in full on the GPU (every fp64 check on CUDA tensors, bf16 included).
# 2. compute-sanitizer memcheck over the one-row path's tests and the -pdl peels.
# 3. exp_gemv_wide (skinny's default strips, cuBLAS) and exp_gemv_kernel (the script-local designs)
#    in one run: does skinny's strip now reach the 2-D script kernel's 87-89% on 1 x 16384 x 2048?
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 150 python3 -m pytest -q -n 8 tests/test_skinny.py -p no:cacheprovider > $OUT/tests_skinny.txt 2>&1
echo "test_skinny (GPU) rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/tests_skinny.txt | tail -5
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q tests/test_skinny.py \
  -k "one_row or pdl_path" -p no:cacheprovider > $OUT/sanitizer_one_row.txt 2>&1
echo "memcheck (one_row, pdl_path) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_one_row.txt | tail -3
timeout 100 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_2d.json --budget-s 80 > $OUT/gemv_wide_2d.log 2>&1
echo "exp_gemv_wide rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_2d.log | sed -E 's/ \| next:.*//' | tail -13
timeout 100 python3 scripts/exp_gemv_kernel.py --out $OUT/gemv_kernel_2d.json --budget-s 80 > $OUT/gemv_kernel_2d.log 2>&1
echo "exp_gemv_kernel rc=$?"; tail -12 $OUT/gemv_kernel_2d.log
