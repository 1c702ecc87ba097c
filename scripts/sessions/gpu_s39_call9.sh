#!/usr/bin/env bash
# Session 39 (~3 min; GPU only), on the final kernels (the 2-D one-row path reverted):
# 1. tests/test_skinny.py in full on the GPU (the new one-row test, the epilogue test's device fix)
#    and memcheck over the one-row and -pdl tests.
# 2. Nsight Compute: why the script's plain 2-D GEMV (prod-BN4-BK1024-W2, 17.7 us on
#    1 x 16384 x 2048 in calls 6-7) outruns skinny's strip on the same tile (20.9 us, call 8) and
#    its best (BN4-BK512-W2, 19.7-20.2 us): registers, occupancy, DRAM throughput, stalls.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 130 python3 -m pytest -q -n 8 tests/test_skinny.py -p no:cacheprovider > $OUT/tests_skinny.txt 2>&1
echo "test_skinny (GPU) rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/tests_skinny.txt | tail -5
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q tests/test_skinny.py \
  -k "one_row or pdl_path" -p no:cacheprovider > $OUT/sanitizer_one_row.txt 2>&1
echo "memcheck (one_row, pdl_path) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_one_row.txt | tail -3
timeout 100 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section MemoryWorkloadAnalysis --kernel-name regex:"_gemv|_skinny_kernel" --launch-count 9 \
  python3 scripts/exp_gemv_kernel.py --ncu-run 1x16384x2048 \
  --choices prod-BN4-BK1024-W2,skinny:BM1-BN4-BK1024-SK1-S1-W2-core-det,skinny:BM1-BN4-BK512-SK1-S1-W2-core-det \
  > $OUT/ncu_gemv_kernel.txt 2>&1
echo "ncu rc=$?"; grep -E "^  [_a-z]+.*\(|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued" $OUT/ncu_gemv_kernel.txt | head -60
