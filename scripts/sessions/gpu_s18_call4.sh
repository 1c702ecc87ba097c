#!/usr/bin/env bash
# Session 18, call 4: the edge suite again with the standard profile's 10x cut and persistent_tma's
# N = 1 layout fix (`gemmtune bench`, Inductor and TunableOp skipped), after the one candidate that
# timed out on 1 x 1 x 65536 is run alone. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 90 python3 scripts/exp_edge_slow.py > $OUT/edge_slow.log 2>&1
echo "edge_slow rc=$?"; grep -v Warning $OUT/edge_slow.log | tail -5
timeout ${BENCH_S:-330} python3 -m gemmtune.cli bench --suite benchmarks/suites/edge-s18.csv \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-270} )) --skip-tunableop --skip-inductor --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -v Warning $OUT/bench.log | tail -5
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A22 "^## Per shape: speedup" $OUT/bench/*.md | head -30
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
