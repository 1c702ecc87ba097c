#!/usr/bin/env bash
# Device calls 5-6 of session 4 (2026-11-24): #19's headline on the public suite (less fp8, measured
# apart): every gemmtune mode, the model's adaptive top-k included, against Inductor max-autotune
# (its tuning wall time) and cuBLAS. BENCH_GROUPS picks the part of the suite this call runs.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
timeout ${BENCH_S:-560} python3 -m gemmtune.cli bench --groups ${BENCH_GROUPS} --deadline $(( $(date +%s) + ${DEADLINE_S:-480} )) \
  --skip-tunableop --extra-modes auto --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|^\| (all|decode|splitk|odd|prefill|square) " $OUT/bench/*.md | cut -c1-250
grep -A9 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png
