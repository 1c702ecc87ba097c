#!/usr/bin/env bash
# Session 19, call 2: --fast with the H100 ranker retrained on call 1's tiny-K / huge-K collection
# (.s19model/, carried) beside --fast with the shipped one, in one `gemmtune bench` run on
# benchmarks/suites/validate-s19.csv: the 15 edge shapes of call 1, then the public decode, splitk
# and odd groups. The report's "model top-1" column is --fast with the new model
# (scripts/exp_fast_new_model.py). GPU only; carry .whl, .s19model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 560 python3 scripts/exp_fast_new_model.py .s19model/nvidia-h100-rank.json -- \
  --suite benchmarks/suites/validate-s19.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-470} )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A40 "^## Per shape: speedup" $OUT/bench/*.md | head -44
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
