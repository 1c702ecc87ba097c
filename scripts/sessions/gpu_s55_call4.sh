#!/usr/bin/env bash
# Session 55, call 4 (GPU only; no carry; ~6 min): (1) the final tree's -m gpu lane (with the capture/nn
# hunt merged); (2) 512x4096x4096 bf16, the one parity row above 1.02 (1.05-1.09x in calls 2 and 3, with
# coordinate descent ruled out), whose compiled K loop matches the template stand-in's: Nsight Compute on
# Inductor's template, ours and our static + indexed form, and Inductor's generated source kept
# (--code-dir) to compile offline beside ours.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 240 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
timeout 150 ncu --profile-from-start off --set full --csv --page details \
  python3 scripts/parity_ncu.py 512x4096x4096:bfloat16:BM64-BN128-BK64-S4-W4-G8:static_ik > $OUT/ncu.csv 2> $OUT/ncu.err
echo "ncu rc=$?"; tail -3 $OUT/ncu.err; wc -l $OUT/ncu.csv
timeout $(( 540 - $(date +%s) + T0 )) python3 scripts/parity_inductor.py --static --indexed-k --rounds 5 \
  --only 512x4096x4096 --code-dir $OUT/code --out $OUT/parity_512.json > $OUT/parity_512.log 2>&1
echo "parity rc=$?"; grep -E "ratio" $OUT/parity_512.log | sed -E 's/ \| ours \{.*//' | cut -c1-300
gzip -f $OUT/gpu_tests.txt $OUT/ncu.csv
echo "call took $(( $(date +%s) - T0 )) s"
