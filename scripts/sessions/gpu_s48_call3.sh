#!/usr/bin/env bash
# Session 48, call 3 (GPU only; no carry; ~9 min): fp32 products as 3xTF32 by default
# (gemmtune.precision). The whole -m gpu lane (the new tensor-core and accuracy tests among it),
# then `gemmtune bench` on 11 fp32 shapes of the five classes (benchmarks/suites/fp32-s48.csv:
# the public suite's two fp32 rows and nine from the random suites of sessions 47-48), cuBLAS's
# SGEMM interleaved: what a user's --fast, default and model top-5 runs get now.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 330 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
timeout $(( 560 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite benchmarks/suites/fp32-s48.csv \
  --skip-inductor --skip-tunableop --deadline $(( T0 + 540 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | head
grep -E "^(decode|splitk|odd|prefill|square) " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -A9 "Geomean % of the physical" $OUT/bench/*.md; grep -A9 "^## Geomean speedup" $OUT/bench/*.md
grep -A5 "Tuning wall" $OUT/bench/*.md; grep -iE "TFLOP" $OUT/bench/*.md | head -3
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
