#!/usr/bin/env bash
# Session 48, call 2 (GPU only; no carry; ~5 min): fp32 without TF32 as 3xTF32 on tensor cores
# (scripts/exp_fp32x3.py): 11 fp32 shapes of the suites' classes tuned twice (IEEE Triton products,
# then 3xTF32), the winners' errors against fp64 beside cuBLAS's.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 540 python3 scripts/exp_fp32x3.py --out /tmp/x3 2>&1 | tee $OUT/fp32x3.log | tail -40
cp /tmp/x3/fp32x3.json /tmp/x3/accuracy.json /tmp/x3/summary_*.json $OUT/ 2>/dev/null
tail -5 /tmp/x3/tune_tf32x3.log
