#!/usr/bin/env bash
# Prepared in session 43 for session 44 (GPU only; no carry; ~2.5 min). Whether a norm fold can match
# the plain strip: session 43 measured the fold at 1.12-1.58x the plain strip's time (its g loads and
# its sum of squares cost registers, so resident warps). Here the unit-weight fold as well
# (skinny.run(..., norm_eps=e) alone, on weights that hold g: no g loads; 46 / 64 registers against
# the plain strip's 38 / 56, compiled offline), timed in CUDA graphs and under Nsight Compute. If the
# unit-weight fold runs as the plain strip does, a fold with g in the fused weight (and the residual
# add taken into the strip before it) is worth building; if not, the sum of squares must leave the
# loop (computed before it, from x in L2) first.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_norm_fold_kernel.py 2>&1 | tail -2
cd scripts
timeout 90 python3 exp_fold_ncu.py time 2>&1 | tee $OUT/fold_time.txt
timeout 150 ncu --kernel-name regex:skinny --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats python3 exp_fold_ncu.py once > $OUT/fold_ncu.txt 2>&1
echo "ncu rc=$?"
grep -E "_skinny|Duration|DRAM Throughput|Registers Per|Achieved Occupancy" $OUT/fold_ncu.txt | head -80
