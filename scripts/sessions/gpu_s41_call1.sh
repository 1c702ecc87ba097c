#!/usr/bin/env bash
# Prepared in session 40 for session 41 (~7-8 min; GPU only; no carry). Run FIRST.
#
# skinny's BN2-BK2048-W2 -flat-sum strip ran 1 x 2048 x 8192 in 18.4-18.7 us where
# exp_gemv_kernel.py's "reduce" kernel of the same tile ran 11.2-11.5 (session 40, calls 3, 6, 7;
# ncu: 38% against 61% of DRAM bandwidth, with the same registers and occupancy). Its SASS
# (sm_90, triton 3.6, nvdisasm, offline) showed why: the -flat loop reads B and A through pointers
# built as one i32 offset tensor plus a base, so every 16-byte chunk has its own 64-bit pointer,
# and ptxas keeps 2-3 of a step's 12 loads in flight. scripts/sessions/s41_flat_pointers.patch
# builds them as the script does (a row's pointer plus the K range: immediates in the SASS) and
# offsets them by a scalar in the loop; 8 of the 12 loads then issue together. It passes the
# interpreter's tests (348 one-row, -flat, -pdl, view and fp64 tests); nothing of it has run on a GPU.
# This call, on one machine, before and after the patch:
# 0. the GPU tests of the one-row, -flat and -pdl paths on the committed kernel;
# 1. exp_gemv_wide's sweep (three layouts of every tile, 12 decode GEMVs) and exp_gemv_kernel's
#    reference kernels, on the tree as committed;
# 2. git apply the patch; tests/test_skinny.py in full on the GPU and memcheck over the one-row,
#    -flat and -pdl tests; the same sweep and reference again.
# Compare pair by pair (scripts/compare_gemv_sweeps.py). If the patch wins, commit it (and
# drop the .patch); then re-pick _DEFAULT_ONE_ROW from the patched sweep and run bench on
# benchmarks/suites/decode-m1-s40.csv and bench-model decode_b1 (gpu_s40_call4.sh).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
# The committed kernel first: session 40 changed it after its last GPU test run (the multi-row
# -flat-sum path, and the -flat peel moved into _flat_first_b).
timeout 90 python3 -m pytest -q -n 8 tests/test_skinny.py -k "one_row or flat or pdl" -p no:cacheprovider > $OUT/tests_skinny_committed.txt 2>&1
echo "test_skinny one_row/flat/pdl (GPU, committed) rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/tests_skinny_committed.txt | tail -5
timeout 130 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_before.json --budget-s 110 > $OUT/gemv_wide_before.log 2>&1
echo "sweep before rc=$?"
timeout 60 python3 scripts/exp_gemv_kernel.py --out $OUT/gemv_kernel_before.json --budget-s 45 > $OUT/gemv_kernel_before.log 2>&1
echo "reference before rc=$?"
{ git apply scripts/sessions/s41_flat_pointers.patch 2>/dev/null || patch -p1 < scripts/sessions/s41_flat_pointers.patch; } && echo "patch applied" || { echo "patch did not apply"; exit 1; }
timeout 150 python3 -m pytest -q -n 8 tests/test_skinny.py -p no:cacheprovider > $OUT/tests_skinny.txt 2>&1
echo "test_skinny (GPU, patched) rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/tests_skinny.txt | tail -5
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q tests/test_skinny.py \
  -k "one_row or pdl_path or flat" -p no:cacheprovider > $OUT/sanitizer_flat.txt 2>&1
echo "memcheck (patched) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_flat.txt | tail -3
timeout 130 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_after.json --budget-s 110 > $OUT/gemv_wide_after.log 2>&1
echo "sweep after rc=$?"
timeout 60 python3 scripts/exp_gemv_kernel.py --out $OUT/gemv_kernel_after.json --budget-s 45 > $OUT/gemv_kernel_after.log 2>&1
echo "reference after rc=$?"
python3 scripts/compare_gemv_sweeps.py $OUT/gemv_wide_before.json $OUT/gemv_wide_after.json
