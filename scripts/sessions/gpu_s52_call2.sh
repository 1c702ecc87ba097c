#!/usr/bin/env bash
# Session 52, call 2 (GPU only; no carry; ~4 min): decode b1's un-graphed residual with gemmtune's
# forwards in the loop (diag_decode_gc's patch_conv: every layer converted, every eager path on
# F.linear) against an unpatched deep copy, 101 interleaved rounds, the collector as a user has it.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
for m in llama-1b qwen3-0.6b; do
  timeout 230 python3 scripts/diag_decode_gc.py --model $m --regimes default --rounds 101 --out $OUT/abc-$m.json \
    > $OUT/abc-$m.log 2>&1
  echo "$m rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/abc-$m.log | tail -2 | cut -c1-1800
done
echo "call took $(( $(date +%s) - T0 )) s"
