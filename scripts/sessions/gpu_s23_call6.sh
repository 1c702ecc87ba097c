#!/usr/bin/env bash
# Session 23, call 6: call 1's 16 shapes outside every store again on the final tree, Inductor now
# timed with its output held (the fair "% of best"), then the parity harness's large rows with the
# same fix. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 430 python3 -m gemmtune.cli bench --suite benchmarks/suites/validate-s23.csv \
  --skip-tunableop --deadline $(( $(date +%s) + 410 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A7 "Tuning wall" $OUT/bench/*.md | head -9; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A24 "^## Per shape: speedup" $OUT/bench/*.md | head -24
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
timeout 140 python3 scripts/parity_inductor.py --large --out $OUT/parity_large.json > $OUT/parity_large.log 2>&1
echo "parity rc=$?"; grep -E "^[0-9]+x" $OUT/parity_large.log | cut -c1-150
