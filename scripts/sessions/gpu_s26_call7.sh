#!/usr/bin/env bash
# Session 26, call 7 (final tree): every GPU-marked test; then gemmtune bench on decode layers at
# M = 1-8 that no earlier call measured (small_decode3.csv), after --fast's GEMV picks were widened
# to M <= 4. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
R=benchmarks/results/2026-11-27-h100-s26
timeout 200 python3 -m gemmtune.cli bench --suite $R/small_decode3.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 170 )) --out $OUT/bench3 > $OUT/bench3.log 2>&1
echo "bench3 rc=$?"; grep -E "candidates in|left out" $OUT/bench3.log | head
grep -A6 "Geomean % of the physical" $OUT/bench3/*.md; grep -A6 "^## Geomean speedup" $OUT/bench3/*.md
grep -A5 "Tuning wall" $OUT/bench3/*.md; grep -E "^\| decode \|" $OUT/bench3/*.md | head -12
rm -f $OUT/bench3/*.png
tar czf $OUT/bench.tgz -C $OUT bench3 && rm -rf $OUT/bench3
