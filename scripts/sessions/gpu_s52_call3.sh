#!/usr/bin/env bash
# Session 52, call 3 (GPU only; no carry; ~4 min): call 2 found a model whose layers gemmtune
# converted (every eager path on F.linear) 0.981x / 0.983x an unpatched copy at decode b1, while
# patching without converting was at parity. Split that cost: the class assignment alone
# (copy_reclassed) against gemmtune's forward (conv_torchclass: converted, class set back).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
for m in llama-1b qwen3-0.6b; do
  timeout 230 python3 scripts/diag_decode_gc.py --model $m --regimes default --rounds 101 \
    --variants copy,patch_conv,copy_reclassed,conv_torchclass --out $OUT/split-$m.json > $OUT/split-$m.log 2>&1
  echo "$m rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/split-$m.log | tail -3 | cut -c1-2000
done
echo "call took $(( $(date +%s) - T0 )) s"
