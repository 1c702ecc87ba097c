#!/usr/bin/env bash
# Session 15: the public suite's groups (env BENCH_GROUPS, default decode,splitk,odd) after two
# tuning changes: --fast also benchmarks the model's next best choice (model.topk.FAST_EXTRA),
# and a winner within 5% of cuBLAS is timed again beside it in interleaved rounds (tuning.runoff).
# EXTRA_MODES (default none) adds bench --extra-modes. GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/device_env.sh"
record_env lightgbm
G=${BENCH_GROUPS:-decode,splitk,odd}
X=${EXTRA_MODES:+--extra-modes $EXTRA_MODES}
timeout ${BENCH_S:-570} python3 -m gemmtune.cli bench --groups "$G" $X \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-500} )) --skip-tunableop --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|tuning [0-9]+ shapes|run-off" $OUT/bench.log | head -40
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A8 "^## Geomean speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png
# The device returns at most 8 files: the bench folder travels as one archive.
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
