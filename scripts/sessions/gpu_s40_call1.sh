#!/usr/bin/env bash
# Prepared in session 39 for session 40 (~1.5 min; GPU only; no carry). Session 39 ran out of
# device time before this measurement.
#
# skinny's M = 1 strip holds the [1, BN, BK] product of a 3-D layout; broadcasting A into it is a
# shared-memory layout conversion with 4-10 BAR.SYNC inside the K loop (SASS compiled offline with
# triton 3.9 for sm_90: BN4-BK512-W2 and BN4-BK1024-W2). A plain 2-D GEMV kernel
# (scripts/exp_gemv_kernel.py, no barrier in its loop) beat skinny's best strip on 10 of 12 decode
# GEMVs in session 39 (calls 6-7; 1 x 16384 x 2048 17.7 us against 19.7, cuBLAS 18.3).
# s39_one_row_2d.patch gives skinny a 2-D path at BLOCK_M = 1 and the default GEMV strips that
# the plain kernel won with. With the OLD defaults that 2-D path lost on 6 of 12 shapes (call 7),
# so it is applied here, on the device's copy only, and measured: exp_gemv_wide's default-space
# best against cuBLAS on 12 decode GEMVs, then the same without the patch, both in this run.
# Keep the patch (git apply scripts/sessions/s39_one_row_2d.patch; commit) only if its
# default-space best wins on most shapes; then run skinny's GPU tests and memcheck
# (gpu_s39_call9.sh's first two steps) and bench-model decode_b1 (gpu_s39_call4.sh).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 100 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_3d.json --budget-s 80 > $OUT/gemv_wide_3d.log 2>&1
echo "exp_gemv_wide (3-D, as committed) rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_3d.log | sed -E 's/ \| next:.*//' | tail -13
git apply scripts/sessions/s39_one_row_2d.patch || patch -p1 < scripts/sessions/s39_one_row_2d.patch || exit 1
timeout 100 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_2d.json --budget-s 80 > $OUT/gemv_wide_2d.log 2>&1
echo "exp_gemv_wide (2-D patch) rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_2d.log | sed -E 's/ \| next:.*//' | tail -13
