#!/usr/bin/env bash
# Session 24, call 11: the final tree on the public decode, splitk and odd groups with Inductor
# max-autotune (prepared launches, pad copies on Triton, DecomposeK's one-wave default splits and
# --fast's one-wave DecomposeK pick), then the eight long-K shapes without Inductor. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
T0=$(date +%s)
timeout 430 python3 -m gemmtune.cli bench --groups decode,splitk,odd --skip-tunableop \
  --deadline $(( T0 + 400 )) --out $OUT/public > $OUT/public.log 2>&1
echo "public rc=$?"
grep -A8 "Tuning wall" $OUT/public/*.md | tail -6; grep -A6 "^## Geomean speedup" $OUT/public/*.md | tail -4
grep -A7 "Geomean % of the physical" $OUT/public/*.md | tail -4
grep -A22 "^## Per shape: speedup" $OUT/public/*.md | tail -20
timeout $(( 575 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite benchmarks/suites/validate-s24-longk.csv \
  --skip-inductor --skip-tunableop --deadline $(( T0 + 550 )) --out $OUT/longk > $OUT/longk.log 2>&1
echo "longk rc=$?"; grep -A6 "Tuning wall" $OUT/longk/*.md | tail -4; grep -A12 "^## Per shape: speedup" $OUT/longk/*.md | tail -10
rm -f $OUT/*/*.png
tar czf $OUT/bench.tgz -C $OUT public longk public.log longk.log && rm -rf $OUT/public $OUT/longk $OUT/*.log
