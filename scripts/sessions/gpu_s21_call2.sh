#!/usr/bin/env bash
# Session 21, call 2 (H200): --fast ranked by a candidate H200 ranker (.s21model: the H200 store with
# call 1's rows, pooled with the H100 store, each problem featurized with its own GPU) beside --fast
# with the shipped H200 ranker, in one run, on benchmarks/suites/validate-h200-s21.csv (heads, small N,
# tiny and huge K outside every store, and three public controls). The report's "model top-1" column
# is --fast with the candidate (scripts/exp_fast_new_model.py). GPU only; carry .whl and .s21model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 540 python3 scripts/exp_fast_new_model.py .s21model/nvidia-h200-rank.json -- \
  --suite benchmarks/suites/validate-h200-s21.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-500} )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A10 "Tuning wall" $OUT/bench/*.md | head -11; grep -A24 "^## Per shape: speedup" $OUT/bench/*.md | head -24
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench bench.log && rm -rf $OUT/bench $OUT/bench.log
