#!/usr/bin/env bash
# Session 17, call 6: --fast with the ranker retrained on the odd-head collection (.s17model/,
# carried) beside --fast with the shipped ranker, in one `gemmtune bench` run: the public decode
# and odd groups plus three heads outside suite and training (benchmarks/suites/validate-heads-s17.csv).
# The report's "model top-1" column is --fast with the new model. GPU only; carry .whl, .s17model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 500 python3 scripts/exp_fast_new_model.py .s17model/nvidia-h100-rank.json -- \
  --suite benchmarks/suites/validate-heads-s17.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 420 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A22 "^## Per shape: speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
