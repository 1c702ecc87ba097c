#!/usr/bin/env bash
# Session 27, call 5: the final tree. --fast's padded persistent picks are now the two best-ranked
# flattened configs of the default space (topk.with_padded_persistent). Every GPU-marked test,
# then the validation shapes (validate.csv) once more. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 250 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
timeout 200 python3 -m gemmtune.cli bench --suite benchmarks/results/2026-11-28-h100-s27/validate.csv \
  --skip-inductor --skip-tunableop --deadline $(( $(date +%s) + 180 )) --out $OUT/validate > $OUT/validate.log 2>&1
echo "validate rc=$?"; grep -A8 "^## Geomean speedup" $OUT/validate/*.md; grep -A4 "Tuning wall" $OUT/validate/*.md
grep -E "^(odd|decode|splitk) " $OUT/validate.log | cut -c1-140
rm -f $OUT/validate/*.png
tar czf $OUT/bench.tgz -C $OUT validate && rm -rf $OUT/validate
