#!/usr/bin/env bash
# Session 13: the odd shapes (the public suite's odd group plus three unaligned shapes outside it,
# benchmarks/results/2026-11-26-h100-odd-twins/odd-plus.csv) after the twin rule (tuning.plan:
# a picked triton_mm / triton_static config brings its twin). gemmtune default and --fast against
# Inductor max-autotune and cuBLAS. GPU only; carry .whl (lightgbm for the shipped ranker).
set -u
source "$(dirname "$0")/device_env.sh"
record_env lightgbm
timeout ${BENCH_S:-560} python3 -m gemmtune.cli bench --suite benchmarks/results/2026-11-26-h100-odd-twins/odd-plus.csv \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-480} )) --skip-tunableop --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|^\| (all|odd|odd_new) " $OUT/bench/*.md | cut -c1-250
grep -A9 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png
