#!/usr/bin/env bash
# Session 24, call 12: every GPU-marked test on the final tree (after DecomposeK's one-wave default
# splits and --fast's one-wave pick), then the public prefill and square groups with Inductor.
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
T0=$(date +%s)
timeout 200 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/gpu_tests.txt | tail -6
timeout $(( 470 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups prefill,square --skip-tunableop \
  --deadline $(( T0 + 440 )) --out $OUT/public > $OUT/public.log 2>&1
echo "public rc=$?"
grep -A8 "Tuning wall" $OUT/public/*.md | tail -6; grep -A5 "^## Geomean speedup" $OUT/public/*.md | tail -3
grep -A6 "Geomean % of the physical" $OUT/public/*.md | tail -3
rm -f $OUT/*/*.png
tar czf $OUT/bench.tgz -C $OUT public public.log && rm -rf $OUT/public $OUT/public.log
