#!/usr/bin/env bash
# Device call: skinny/splitk sweep vs cuBLAS, then Nsight Compute on the best picks.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
python3 scripts/exp_skinny.py --out $OUT/skinny.json --budget-s ${BUDGET_S:-420} 2>&1 | tee $OUT/exp.log
timeout 150 ncu --clock-control none --kernel-name regex:'skinny|tiled|gemm|gemv|Kernel' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section WarpStateStats python3 scripts/ncu_skinny.py $OUT/skinny.json > $OUT/ncu.txt 2>&1
echo "ncu rc=$?"; grep -E "^\s+(DRAM Throughput|Memory Throughput|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit Registers|Grid Size|Block Size)|skinny|tiled|gemv|gemm|\(" $OUT/ncu.txt | head -150
