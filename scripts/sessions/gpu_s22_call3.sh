#!/usr/bin/env bash
# Session 22, call 3 (H200): --fast, the default space and model top-5 on 14 shapes outside both stores
# (benchmarks/suites/validate-h200-s22.csv: decode with a Linear weight, odd-vocabulary heads at M 40-112,
# tall problems with N <= 100, mid M), the classes where the spaces lost their GROUP_M and reduction
# twins (configs.canonical_group_m). Inductor skipped. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 330 python3 -m gemmtune.cli bench --suite benchmarks/suites/validate-h200-s22.csv --skip-inductor \
  --skip-tunableop --deadline $(( $(date +%s) + 300 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A7 "Tuning wall" $OUT/bench/*.md | head -7; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A20 "^## Per shape: speedup" $OUT/bench/*.md | head -20
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
