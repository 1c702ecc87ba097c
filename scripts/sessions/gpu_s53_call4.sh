#!/usr/bin/env bash
# Session 53, call 4 (GPU only; no carry; ~2 min): Nsight Compute on the two even-K odd-N rows whose
# best form stays 3-6% behind Inductor's template with the same K loop (300x20001x512 fp16,
# 96x50257x768 bf16), and on 96x50257x768's wrapped form, which runs 1.18-1.31x the template with
# an instruction-for-instruction identical K loop (calls 2 and 3).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 240 ncu --profile-from-start off --set full --csv --page details \
  python3 scripts/parity_ncu.py 96x50257x768:bfloat16:BM64-BN128-BK64-S4-W4-G8:static_ik,static_ik_wn \
  300x20001x512:float16:BM128-BN128-BK64-S3-W4-G8:static_ik,static_ik_wn > $OUT/ncu.csv 2> $OUT/ncu.err
echo "ncu rc=$?"; tail -8 $OUT/ncu.err; wc -l $OUT/ncu.csv
gzip -f $OUT/ncu.csv
echo "call took $(( $(date +%s) - T0 )) s"
