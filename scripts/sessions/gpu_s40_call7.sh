#!/usr/bin/env bash
# Session 40, call 7 (~5 min; GPU only; no carry): the final tree's skinny kernel.
# Call 6 (ncu) found skinny's BN2-BK2048-W2 -flat-sum strip at 38% of DRAM bandwidth where
# exp_gemv_kernel's "reduce" kernel, the same tile with the same registers, occupancy and loads,
# ran at 61%; the one difference in their PTX was the order of the loads (A's vector before B's
# tile in skinny). The -flat loop now loads B first. This call:
# 1. tests/test_skinny.py in full on the GPU, and memcheck over the one-row, -flat and -pdl tests;
# 2. exp_gemv_wide's sweep (three layouts of every tile) and exp_gemv_kernel's reference kernels in
#    the same run, to compare with call 3's.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 150 python3 -m pytest -q -n 8 tests/test_skinny.py -p no:cacheprovider > $OUT/tests_skinny.txt 2>&1
echo "test_skinny (GPU) rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/tests_skinny.txt | tail -5
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q tests/test_skinny.py \
  -k "one_row or pdl_path or flat" -p no:cacheprovider > $OUT/sanitizer_flat.txt 2>&1
echo "memcheck (one_row, pdl_path, flat) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_flat.txt | tail -3
timeout 150 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_bfirst.json --budget-s 130 > $OUT/gemv_wide_bfirst.log 2>&1
echo "exp_gemv_wide rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_bfirst.log | sed -E 's/ \| next:.*//' | tail -13
timeout 70 python3 scripts/exp_gemv_kernel.py --out $OUT/gemv_kernel.json --budget-s 50 > $OUT/gemv_kernel.log 2>&1
echo "exp_gemv_kernel rc=$?"; tail -12 $OUT/gemv_kernel.log | sed -E 's/ \| persist.*//'
