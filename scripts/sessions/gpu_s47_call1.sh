#!/usr/bin/env bash
# Session 47, call 1 (GPU only; no carry; ~5 min): the aligned-window GEMV for odd-N row-major B
# (scripts/exp_gemv_oddn.py) against cuBLAS and skinny's default strips, then Nsight Compute on
# gpt2_lmhead_m1's best of each.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 330 python3 scripts/exp_gemv_oddn.py --out $OUT/gemv_oddn.json --budget-s 240 > $OUT/gemv_oddn.log 2>&1
echo "exp rc=$?"; cat $OUT/gemv_oddn.log | grep -v "^   not timed" | head -30
ids=$(python3 - <<'PY'
import json, os
r = json.load(open(os.environ["OUT"] + "/gemv_oddn.json"))["rows"][0]
print(r["best_skinny"] + "," + r["best_shift"])
PY
)
echo "ncu on $ids"
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_op_global_ld.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum \
  python3 scripts/exp_gemv_oddn.py --ncu-run 1x50257x768xbf16 --choices "$ids" > $OUT/ncu.txt 2>&1
echo "ncu rc=$?"; grep -E "CC 9|time_duration|dram__|warps_active|inst_executed|registers|grid_size|block_size|sectors" $OUT/ncu.txt | grep -v "^==PROF==" | head -90
