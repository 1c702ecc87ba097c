#!/usr/bin/env bash
# Session 20, call 2: on benchmarks/suites/validate-fp32-s20.csv (7 fp32 shapes outside call 1's
# collection, the public tiny_mn_fp32 among them, and 3 bf16 shapes with a column-major A, a layout
# the ranker never saw), one `gemmtune bench` run with three --fast columns
# (scripts/exp_fast_columns.py): the shipped ranker; the ranker retrained in call 1 (.s20model/,
# carried; report column "model top-1"); the shipped ranker without session 19's unsure widening
# (column "model top-20"). GPU only; carry .whl, .s20model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 560 python3 scripts/exp_fast_columns.py .s20model/nvidia-h100-rank.json -- \
  --suite benchmarks/suites/validate-fp32-s20.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-480} )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A10 "Tuning wall" $OUT/bench/*.md; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A16 "^## Per shape: speedup" $OUT/bench/*.md | head -18
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
