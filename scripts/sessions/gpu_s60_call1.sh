#!/usr/bin/env bash
# Session 60, call 1 (GPU only; no carry; ~8 min).
# 1. #17: the paired decode-step ladder with split_hot (the fixed fast path as a small function of its own) beside the
#    floors and the shipped forward (s59: +149 us a step, ~1 us a layer above the floor, not the compile check).
# 2. #15: the read ladder (exp_read_ladder.py): pure reads, cuBLAS and skinny at 4-235 MB in the bench's harness, to
#    fit the fixed cost per launch that a bytes-only floor leaves out (o_m8 at 67% of floor, gateup_m16 at 98%).
# 3. Nsight Compute on the o_m8 class: skinny's best strip, cuBLAS, a streaming read of the same bytes.
# 4. compute-sanitizer memcheck on outputs interleaved with an input (s58-59's out_overlap; CPU-tested only).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 170 python3 scripts/sessions/exp_forward_ladder.py --device cuda --dtype bfloat16 --features 2048 --steps 650 \
  --variants floor,split_hot,last_shape,hot_nocheck,floor_b > $OUT/ladder.log 2>&1; echo "ladder rc=$?"
grep -v Warn $OUT/ladder.log | tail -10
echo "t=$(( $(date +%s) - T0 )) s"
timeout 150 python3 scripts/sessions/exp_read_ladder.py --out $OUT/read_ladder.json > $OUT/read_ladder.log 2>&1
echo "read ladder rc=$?"; cat $OUT/read_ladder.log | tail -20
echo "t=$(( $(date +%s) - T0 )) s"
cd scripts/sessions && PYTHONPATH=$PWD:$PYTHONPATH timeout 100 ncu --clock-control none -k regex:'skinny|stream_sum|gemv|gemm|Kernel' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy --section WarpStateStats \
  python3 ncu_decode_o.py > $OUT/ncu_o_m8.txt 2>&1; echo "ncu rc=$?"; cd ../..
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|Registers|Achieved Occupancy|Grid Size|Block Size" $OUT/ncu_o_m8.txt | head -60
echo "t=$(( $(date +%s) - T0 )) s"
timeout 150 compute-sanitizer --tool memcheck python3 scripts/sanitize_overlap.py > $OUT/sanitize_overlap.log 2>&1
echo "sanitize rc=$?"; tail -4 $OUT/sanitize_overlap.log
echo "call took $(( $(date +%s) - T0 )) s"
