#!/usr/bin/env bash
# Session 49, call 3 (GPU only; no carry; ~7 min): the final tree. The whole -m gpu lane (the
# short-K persistent pick, the bmm/scaled and model-path hunts' fixes), then the short-K rule out
# of sample: a new seed of the smallk and tall classes (scripts/random_suite.py --seed 50), cuBLAS,
# Inductor max-autotune, --fast, the default space and model top-5 side by side.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 260 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
python3 scripts/random_suite.py --seed 50 --per-group decode=0,splitk=0,odd=0,prefill=0,square=0,tall=3,smallk=9 --out $OUT/rand50.csv
timeout $(( 560 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite $OUT/rand50.csv --skip-tunableop \
  --deadline $(( T0 + 530 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | grep -v "^E1130" | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A6 "Tuning wall" $OUT/bench/*.md; grep "short K" $OUT/bench.log | head -3
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
