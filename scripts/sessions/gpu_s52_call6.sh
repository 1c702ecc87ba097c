#!/usr/bin/env bash
# Session 52, call 6 (GPU only; no carry; ~3 min): calls 4-5 again, one class per variant (they
# made a class per layer, itself a cost): copy, patch_conv, and each piece of the fast path alone.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
V=copy,patch_conv,fwd_torch_body,fwd_compiling,fwd_paths,fwd_params,gt_class_torch_fwd
timeout 200 python3 scripts/diag_decode_gc.py --model llama-1b --regimes default --rounds 121 --variants $V \
  --out $OUT/one-llama-1b.json > $OUT/one-llama-1b.log 2>&1
echo "llama rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/one-llama-1b.log | tail -2 | cut -c1-3500
echo "call took $(( $(date +%s) - T0 )) s"
