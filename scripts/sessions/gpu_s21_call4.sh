#!/usr/bin/env bash
# Session 21, call 4 (H200): --fast with up to topk.CORE_PICKS of skinny's default core tiles (this
# tree) beside session 20's core pick (the ranker's first core choice of the whole space; the report's
# "model top-1" column, scripts/exp_core_picks.py), on fp32 decode and bf16 odd-vocabulary heads at
# M <= 8 (benchmarks/suites/validate-core-s21.csv). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 300 python3 scripts/exp_core_picks.py -- --suite benchmarks/suites/validate-core-s21.csv --skip-inductor \
  --skip-tunableop --deadline $(( $(date +%s) + 270 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A10 "Tuning wall" $OUT/bench/*.md | head -11; grep -A12 "^## Per shape: speedup" $OUT/bench/*.md | head -12
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench bench.log && rm -rf $OUT/bench $OUT/bench.log
