#!/usr/bin/env bash
# Session 43, call 5 (GPU only; no carry; ~6 min):
# 1. the GPU test lane (-m gpu), last run whole in session 39, now with the GPU model zoo
#    (tests/test_model_zoo_gpu.py: ten architectures in bf16, fused + patched, eager and Inductor);
# 2. why the norm fold lost in call 3: the fold against the plain strip on the step's two shapes and
#    configs, timed in CUDA graphs, then one launch of each under Nsight Compute.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 330 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -15 $OUT/gpu_tests.txt
cd scripts
timeout 60 python3 exp_fold_ncu.py time 2>&1 | tee $OUT/fold_time.txt
timeout 120 ncu --kernel-name regex:skinny --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis --section WarpStateStats python3 exp_fold_ncu.py once > $OUT/fold_ncu.txt 2>&1
echo "ncu rc=$?"
grep -E "_skinny|Duration|DRAM Throughput|L2 Cache Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit Registers|Stall Long" $OUT/fold_ncu.txt | head -80
