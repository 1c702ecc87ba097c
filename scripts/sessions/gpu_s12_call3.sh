#!/usr/bin/env bash
# Session 12, device call 3 (one GPU, nothing carried): SPLIT_MODE 3 (parallel fixup) on the GPU:
# compute-sanitizer memcheck on odd shapes, then the split-K reduction experiment with the new
# variant beside atomic / det / part / cuBLAS, then ncu on the picks.
set -u
source scripts/device_env.sh
record_env
timeout 60 python3 scripts/sanitize_fixup.py > $OUT/fixup_plain.log 2>&1; echo "plain rc=$?"; tail -2 $OUT/fixup_plain.log
timeout 150 compute-sanitizer --tool memcheck python3 scripts/sanitize_fixup.py > $OUT/sanitize.log 2>&1
echo "memcheck rc=$?"; tail -3 $OUT/sanitize.log
timeout ${SWEEP_S:-300} python3 scripts/exp_splitk_reduce.py --out $OUT/splitk_reduce.json --budget-s ${BUDGET_S:-240} \
  > $OUT/sweep.log 2>&1
echo "sweep rc=$?"; grep -v "^#" $OUT/sweep.log | tail -8
timeout ${NCU_S:-120} ncu --profile-from-start off --section SpeedOfLight --section LaunchStats --section Occupancy \
  --csv --page details python3 scripts/exp_splitk_reduce.py --ncu $OUT/splitk_reduce.json > $OUT/ncu.csv 2> $OUT/ncu.err
echo "ncu rc=$?"; gzip -f $OUT/ncu.csv
