#!/usr/bin/env bash
# Session 52, call 5 (GPU only; no carry; ~3 min): call 4 found torch's forward body, as a new
# function under a subclass of gemmtune's Linear (fwd_torch_body), 0.978-0.982x a copy, while
# torch's class with gemmtune's state (call 3's conv_torchclass) ran at parity. Which half: the
# function object or the class.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
V=copy,fwd_torch_body,gt_class_torch_fwd,torch_class_new_fwd
timeout 170 python3 scripts/diag_decode_gc.py --model llama-1b --regimes default --rounds 141 --variants $V \
  --out $OUT/half-llama-1b.json > $OUT/half-llama-1b.log 2>&1
echo "llama rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/half-llama-1b.log | tail -2 | cut -c1-3000
LEFT=$(( 330 - $(date +%s) + T0 ))
timeout $LEFT python3 scripts/diag_decode_gc.py --model qwen3-0.6b --regimes default --rounds 81 --variants $V \
  --out $OUT/half-qwen3-0.6b.json > $OUT/half-qwen3-0.6b.log 2>&1
echo "qwen3 rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/half-qwen3-0.6b.log | tail -2 | cut -c1-3000
echo "call took $(( $(date +%s) - T0 )) s"
