#!/usr/bin/env bash
# Session 22, call 6 (H200): on call 3's suite (benchmarks/suites/validate-h200-s22.csv: outside both stores
# and outside call 5's collection), --fast with the shipped H200 ranker beside --fast with the candidate
# retrained on call 5's store, pooled with the H100 store (.s22model, in the report's "model top-1" column:
# scripts/exp_fast_new_model.py), with the default space and model top-5. GPU only; carry .whl and .s22model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 330 python3 scripts/exp_fast_new_model.py .s22model/nvidia-h200-rank.json -- \
  --suite benchmarks/suites/validate-h200-s22.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 300 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A8 "Tuning wall" $OUT/bench/*.md | head -8; grep -A20 "^## Per shape: speedup" $OUT/bench/*.md | head -20
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
