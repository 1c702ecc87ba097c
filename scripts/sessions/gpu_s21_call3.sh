#!/usr/bin/env bash
# Session 21, call 3 (H200): the tree to land, on the public decode, splitk and odd groups: --fast with
# the shipped (pooled) H200 ranker beside --fast with the ranker it replaced (.s21old, in the report's
# "model top-1" column: scripts/exp_fast_new_model.py); then session 20's untimed changes on their
# suites (benchmarks/suites/validate-fp32-decode-s20.csv, validate-oddn-heads-s20.csv), default and
# --fast. GPU only; carry .whl and .s21old.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 330 python3 scripts/exp_fast_new_model.py .s21old/nvidia-h200-rank.json -- \
  --groups decode,splitk,odd --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 310 )) --out $OUT/public > $OUT/public.log 2>&1
echo "public rc=$?"
grep -A10 "Tuning wall" $OUT/public/*.md | head -11; grep -B2 -A12 "^## Per group" $OUT/public/*.md | head -30
grep -A24 "^## Per shape: speedup" $OUT/public/*.md | head -24
for S in validate-fp32-decode-s20 validate-oddn-heads-s20; do
  timeout 120 python3 -m gemmtune.cli bench --suite benchmarks/suites/$S.csv --skip-inductor --skip-tunableop \
    --deadline $(( $(date +%s) + 105 )) --out $OUT/$S > $OUT/$S.log 2>&1
  echo "$S rc=$?"; grep -A7 "Tuning wall" $OUT/$S/*.md | head -7; grep -A10 "^## Per shape: speedup" $OUT/$S/*.md | sed -n 3,10p
done
rm -f $OUT/*/*.png
tar czf $OUT/runs.tgz -C $OUT public public.log validate-fp32-decode-s20 validate-oddn-heads-s20 validate-fp32-decode-s20.log validate-oddn-heads-s20.log && rm -rf $OUT/public $OUT/validate-* $OUT/*.log
