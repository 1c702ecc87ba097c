#!/usr/bin/env bash
# Session 48, call 6 (GPU only; no carry; ~8 min): the final tree. The whole -m gpu lane (3xTF32
# fp32 by default, the dispatcher hunt's fixes, the first-hour hunt's), `tune --fast` on the 11
# fp32 shapes with the re-charged analytic 3xTF32 picks, the public square group (its fp32 row now
# 3xTF32) against cuBLAS, then fuzz_tune with a new seed in what time is left.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
python3 -m gemmtune.cli tune --suite benchmarks/suites/fp32-s48.csv --fast --store /tmp/s.sqlite \
  --out /tmp/t.json --summary $OUT/fast_summary.json > $OUT/fast.log 2>&1
echo "tune rc=$?"; grep -E "│ [a-z]" $OUT/fast.log | cut -c1-150
timeout $(( 390 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite public --groups square \
  --skip-inductor --skip-tunableop --deadline $(( T0 + 370 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "^square " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -A6 "Geomean % of the physical" $OUT/bench/*.md; grep -A6 "^## Geomean speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
left=$(( 465 - $(date +%s) + T0 ))
if [ $left -gt 60 ]; then
  timeout $left python3 scripts/fuzz_tune.py --n 40 --seed 50 --out /tmp/f50 > $OUT/fuzz50.log 2>&1
  echo "fuzz_tune seed 50 rc=$?"; tail -6 $OUT/fuzz50.log; cp /tmp/f50/fuzz_tune.json $OUT/fuzz_tune50.json 2>/dev/null
fi
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
