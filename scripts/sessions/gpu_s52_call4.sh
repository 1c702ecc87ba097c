#!/usr/bin/env bash
# Session 52, call 4 (GPU only; no carry; ~4 min): call 3 put decode b1's cost of a converted model
# in gemmtune's forward (the class assignment alone and the converted layers under torch's
# forward ran at parity with a copy). Which piece of the forward's fast path costs it: each piece
# alone as the layers' forward (diag_decode_gc.FORWARDS), against the copy and patch_conv.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
V=copy,patch_conv,fwd_torch_body,fwd_compiling,fwd_paths,fwd_params
timeout 200 python3 scripts/diag_decode_gc.py --model llama-1b --regimes default --rounds 121 --variants $V \
  --out $OUT/fwd-llama-1b.json > $OUT/fwd-llama-1b.log 2>&1
echo "llama rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/fwd-llama-1b.log | tail -3 | cut -c1-3000
LEFT=$(( 400 - $(date +%s) + T0 ))
timeout $LEFT python3 scripts/diag_decode_gc.py --model qwen3-0.6b --regimes default --rounds 81 --variants $V \
  --out $OUT/fwd-qwen3-0.6b.json > $OUT/fwd-qwen3-0.6b.log 2>&1
echo "qwen3 rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/fwd-qwen3-0.6b.log | tail -3 | cut -c1-3000
echo "call took $(( $(date +%s) - T0 )) s"
