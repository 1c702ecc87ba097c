#!/usr/bin/env bash
# Device call 3 of session 4 (2026-11-24): #16 odd group after zero_pad (margins-only pad copies),
# default and --fast against cuBLAS; the copies alone, F.pad against zero_pad.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
timeout 60 python3 scripts/pad_copy_bench.py > $OUT/pad_copy.jsonl 2> $OUT/pad_copy.err
echo "pad rc=$?"; cat $OUT/pad_copy.jsonl; tail -3 $OUT/pad_copy.err
timeout ${BENCH_S:-300} python3 -m gemmtune.cli bench --groups odd --skip-inductor --skip-tunableop \
  --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "^odd |candidates in" $OUT/bench.log | sed 's/  */ /g' | cut -c1-300
rm -f $OUT/bench/*.png
