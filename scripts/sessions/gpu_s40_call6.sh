#!/usr/bin/env bash
# Session 40, call 6 (~2-3 min; GPU only; no carry). Why skinny's BN2-BK2048-W2 -flat-sum strip
# ran 1.3-1.65x the time of exp_gemv_kernel's "reduce" kernel at the same tile (call 3: 1 x 2048 x
# 8192 18.5 against 11.2 us; 1 x 16384 x 2048 22.3 against 17.4), when compiled for sm_90 with
# triton 3.6 the two have the same registers (56), loads (12 ld.global.v4) and barriers (3).
# Nsight Compute on both, beside skinny's BN2-BK1024-W2 -flat-sum (14.5 against 15.8 us, the
# other way) and cuBLAS: duration, DRAM throughput, occupancy, stalls, launch config.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
for shape in 1x2048x8192 1x16384x2048; do
  timeout 100 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis -k regex:"_gemv|_skinny|gemv|nvjet" \
    python3 scripts/exp_gemv_kernel.py --ncu-run $shape \
    --choices reduce-BN2-BK2048-W2,skinny:BM1-BN2-BK2048-SK1-S1-W2-core-det-flat-sum,skinny:BM1-BN2-BK1024-SK1-S1-W2-core-det-flat-sum \
    > $OUT/ncu_$shape.txt 2>&1
  echo "ncu $shape rc=$?"
  grep -E "^  [A-Za-z_]+.*\(|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size|L2 Hit Rate|Stall Long|Warp Cycles Per Issued|Mem Busy|Max Bandwidth" $OUT/ncu_$shape.txt | head -80
done
