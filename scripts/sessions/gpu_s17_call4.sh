#!/usr/bin/env bash
# Session 17, call 4: `gemmtune bench` on 14 shapes outside the public suite and outside the H100
# training store (benchmarks/suites/unseen-s17.csv): how --fast generalises. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 560 python3 -m gemmtune.cli bench --suite benchmarks/suites/unseen-s17.csv \
  --deadline $(( $(date +%s) + 480 )) --skip-tunableop --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A8 "^## Geomean speedup" $OUT/bench/*.md; grep -A18 "^## Per shape: speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
