#!/usr/bin/env bash
# Session 49, call 4 (GPU only; no carry; ~7 min): the public suite on the final tree (its fp32 rows
# 3xTF32 since session 48, --fast with the short-K persistent pick), cuBLAS interleaved, no
# Inductor or TunableOp (their figures on this suite: shared/anchors and session 43).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 440 python3 -m gemmtune.cli bench --suite public --skip-inductor --skip-tunableop \
  --deadline $(( T0 + 400 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | head -5
grep -A10 "Geomean % of the physical" $OUT/bench/*.md; grep -A10 "^## Geomean speedup" $OUT/bench/*.md
grep -A6 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
echo "call took $(( $(date +%s) - T0 )) s"
