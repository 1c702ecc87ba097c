#!/usr/bin/env bash
# Session 24, call 10: DecomposeK's default splits chosen by one wave (decompose_k_spec.default_splits)
# instead of the first six powers of two. (1) scripts/exp_decompose_default.py: every split measured
# on the public splitk and decode groups and the eight long-K shapes, and what each rule would keep;
# (2) gemmtune bench on the long-K shapes (default, --fast, top-5; no Inductor). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
T0=$(date +%s)
timeout 240 python3 scripts/exp_decompose_default.py src/gemmtune/data/public.csv benchmarks/suites/validate-s24-longk.csv \
  --groups splitk,decode --out $OUT > $OUT/exp.log 2>&1
echo "exp rc=$?"; tail -4 $OUT/exp.log
gzip -f $OUT/exp_decompose_default.sqlite
timeout $(( 570 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite benchmarks/suites/validate-s24-longk.csv \
  --skip-inductor --skip-tunableop --deadline $(( T0 + 545 )) --out $OUT/longk > $OUT/longk.log 2>&1
echo "longk rc=$?"; grep -A6 "Tuning wall" $OUT/longk/*.md | tail -4; grep -A12 "^## Per shape: speedup" $OUT/longk/*.md | tail -10
rm -f $OUT/*/*.png
tar czf $OUT/bench.tgz -C $OUT longk longk.log && rm -rf $OUT/longk $OUT/longk.log
