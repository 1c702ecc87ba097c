#!/usr/bin/env bash
# Session 14: the public suite's groups (env BENCH_GROUPS, default decode,splitk,odd) after two
# tuning changes: --fast benchmarks the model's first choice of each of its two best families
# (tuning.plan.select_fast), and planning runs on a background thread (tuning.tuner.PlanAhead).
# The extra mode top1 is the model's top 1, what --fast was before, timed in the same run.
# GPU only; carry .whl (lightgbm for the shipped ranker).
set -u
source "$(dirname "$0")/device_env.sh"
record_env lightgbm
G=${BENCH_GROUPS:-decode,splitk,odd}
timeout ${BENCH_S:-570} python3 -m gemmtune.cli bench --groups "$G" --extra-modes top1 \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-500} )) --skip-tunableop --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|tuning [0-9]+ shapes" $OUT/bench.log
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
rm -f $OUT/bench/*.png
# The device returns at most 8 files: the bench folder travels as one archive.
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
