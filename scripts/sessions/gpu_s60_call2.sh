#!/usr/bin/env bash
# Session 60, call 2 (GPU only; no carry; ~6 min). #15: skinny tiles with shallow pipelines and 4-8 warps (2-6
# programs an SM) on decode layers of 8-34 MB, beside skinny's whole default space and cuBLAS, in one tune run
# (exp_decode_sweep.py). Call 1: the o_m8 strip is issue-bound with 4 warps an SM; a streaming read of the same
# bytes runs 1.25-2.5x faster than skinny's default tiles at 8-34 MB.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 500 python3 scripts/sessions/exp_decode_sweep.py --out $OUT/sweep > $OUT/sweep.log 2>&1; echo "sweep rc=$?"
grep -v Warn $OUT/sweep.log | tail -70
gzip -f $OUT/sweep/sweep.sqlite
echo "call took $(( $(date +%s) - T0 )) s"
