#!/usr/bin/env bash
# Session 21, call 6 (H200, the budget's last minutes): --fast with the H200 ranker retrained on call 5's
# store (shipped) beside --fast with the one call 2 validated (.s21c1, in the report's "model top-1"
# column), on the heads and the two public odd-vocabulary heads of validate-h200-s21.csv. GPU only;
# carry .whl and .s21c1.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
grep -E "^(group|head|odd|decode)," benchmarks/suites/validate-h200-s21.csv > /tmp/v6.csv
timeout 120 python3 scripts/exp_fast_new_model.py .s21c1/nvidia-h200-rank.json -- --suite /tmp/v6.csv \
  --skip-inductor --skip-tunableop --deadline $(( $(date +%s) + 95 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A10 "Tuning wall" $OUT/bench/*.md | head -9; grep -A14 "^## Per shape: speedup" $OUT/bench/*.md | head -14
rm -f $OUT/bench/*.png
