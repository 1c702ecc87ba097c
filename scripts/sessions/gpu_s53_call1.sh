#!/usr/bin/env bash
# Session 53, call 1 (GPU only; no carry; ~6 min): #16's odd rows. (1) parity_inductor on the odd
# rows with every form of ours (carried, static, static+indexed, and those with an odd N wrapped)
# against Inductor's template on the same config, 7 interleaved rounds (3 before); (2) Nsight
# Compute, full set, on two odd rows where the best form still sat 6% behind Inductor in session 45
# with the same SASS instruction count per K iteration: where do the cycles go.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 330 python3 scripts/parity_inductor.py --small --odd --static --indexed-k --wrap-odd --rounds 7 \
  --out $OUT/parity_odd.json > $OUT/parity_odd.log 2>&1
echo "parity rc=$?"; grep -E "ratio|Error|error" $OUT/parity_odd.log | cut -c1-400 | tail -12
timeout 200 ncu --profile-from-start off --set full --csv --page details \
  python3 scripts/parity_ncu.py 333x4097x1025:bfloat16:BM64-BN128-BK64-S4-W4-G8:static_ik,static_ik_wn \
  777x1531x2049:float16:BM64-BN128-BK64-S3-W4-G8:static_ik,static_ik_wn > $OUT/ncu.csv 2> $OUT/ncu.err
echo "ncu rc=$?"; tail -8 $OUT/ncu.err; wc -l $OUT/ncu.csv
gzip -f $OUT/ncu.csv
echo "call took $(( $(date +%s) - T0 )) s"
