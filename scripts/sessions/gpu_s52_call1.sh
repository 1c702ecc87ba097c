#!/usr/bin/env bash
# Session 52, call 1 (GPU only; no carry; ~3 min): is decode b1's un-graphed gap between a patched
# model (every layer on cuBLAS) and an unpatched deep copy Python's garbage collector?
# scripts/diag_decode_gc.py, Qwen3-0.6B then Llama-1B, bf16, 21 interleaved rounds per regime.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
python3 -c "import sys, gc; print(sys.version); print('gc threshold', gc.get_threshold())"
T0=$(date +%s)
for m in qwen3-0.6b llama-1b; do
  timeout 200 python3 scripts/diag_decode_gc.py --model $m --out $OUT/gc-$m.json > $OUT/gc-$m.log 2>&1
  echo "$m rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/gc-$m.log | tail -4 | cut -c1-1500
done
echo "call took $(( $(date +%s) - T0 )) s"
