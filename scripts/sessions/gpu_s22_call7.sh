#!/usr/bin/env bash
# Session 22, call 7 (H200, the budget's last minutes): the candidate ranker of call 6 (.s22model, in the
# report's "model top-1" column: scripts/exp_fast_new_model.py) beside --fast with the shipped one, on the
# public decode and odd groups. GPU only; carry .whl and .s22model.
set -u
source "$(dirname "$0")/../device_env.sh"
timeout 235 python3 scripts/exp_fast_new_model.py .s22model/nvidia-h200-rank.json -- --groups decode,odd \
  --skip-inductor --skip-tunableop --deadline $(( $(date +%s) + 170 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo rc=$?; grep -A8 "Tuning wall" $OUT/bench/*.md | head -8; grep -A16 "^## Per shape: speedup" $OUT/bench/*.md | head -16
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
