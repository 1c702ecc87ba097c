#!/usr/bin/env bash
# Session 50, call 4 (GPU only; no carry; ~5 min). (1) scripts/exp_x3_tiles.py --set warpgroup:
# one warp group an SM under 3xTF32, measured (the analytic model's X3_ONE_WARPGROUP_FACTOR was
# set from call 3's lower bounds). (2) fp32 out of sample again, seed 52 (13 shapes of every
# class, benchmarks/suites/fp32-random-s50b.csv), `gemmtune bench` against SGEMM: --fast with its
# 3xTF32 picks drawn from the default space (tuning.plan.x3_pool) and the new charges.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 150 python3 scripts/exp_x3_tiles.py --set warpgroup --out $OUT/x3wg > $OUT/x3wg.txt 2>&1
echo "x3 warpgroup rc=$?"; grep -v "^\s*$" $OUT/x3wg.txt | tail -50
rm -f $OUT/x3wg/*.sqlite-*; gzip -f $OUT/x3wg/x3tiles.sqlite
timeout $(( 500 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite benchmarks/suites/fp32-random-s50b.csv \
  --skip-inductor --skip-tunableop --deadline $(( T0 + 470 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | head -5
grep -E "^(square|prefill|odd|decode|splitk) " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -A9 "Geomean % of the physical" $OUT/bench/*.md | tail -7; grep -A9 "^## Geomean speedup" $OUT/bench/*.md | tail -7
grep -E "of the best" $OUT/bench/*.md | head -5
grep -E "^\| gemmtune (default|--fast) \|" $OUT/bench/*.md | cut -c1-100
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
tar czf $OUT/x3wg.tgz -C $OUT x3wg && rm -rf $OUT/x3wg
echo "call took $(( $(date +%s) - T0 )) s"
