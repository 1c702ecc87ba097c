#!/usr/bin/env bash
# Prepared in session 43 for session 44 (GPU only; no carry; ~2.5 min). Whether the norm fold now
# matches the plain strip: session 43 measured session 42's fold at 1.12-1.58x the plain strip's time
# (x^2 summed inside the K loop cost 10-31 registers, so resident warps). The fold now sums x^2 after
# the loop (skinny._rms_scale; offline for sm_90: 40 / 64 / 64 registers against 38 / 56 / 49), and
# the unit-weight fold (skinny.run(..., norm_eps=e) alone, on weights that hold g: no g loads) is
# timed beside it, in CUDA graphs and under Nsight Compute. If the fold runs as the plain strip does,
# rerun gpu_s43_call3.sh (Llama-1B with GEMMTUNE_FOLD_NORMS=0/1): with the fold, the residual sum
# before each folded norm is now the preceding GEMM's epilogue (fuse_compile._take_residual), so the
# step should lose its 33 add/norm kernels.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_norm_fold_kernel.py 2>&1 | tail -2
# the fold now reads its row again after the loop, and the unit-weight fold reads no g: memcheck both
timeout 100 compute-sanitizer --tool memcheck --print-limit 20 python3 -m pytest -q -p no:cacheprovider \
  tests/test_norm_fold_kernel.py -k "fp64 or views" 2>&1 | tail -3
cd scripts
timeout 90 python3 exp_fold_ncu.py time 2>&1 | tee $OUT/fold_time.txt
timeout 150 ncu --kernel-name regex:skinny --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats python3 exp_fold_ncu.py once > $OUT/fold_ncu.txt 2>&1
echo "ncu rc=$?"
grep -E "_skinny|Duration|DRAM Throughput|Registers Per|Achieved Occupancy" $OUT/fold_ncu.txt | head -80
