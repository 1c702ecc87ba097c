#!/usr/bin/env bash
# Session 29, call 5: an architecture no call has run, Qwen3's default config (hf:qwen3: q/k norms,
# random weights, bf16), decode b1, eager against eager + patch, un-graphed (paired rounds) and from
# CUDA graphs. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
timeout 280 python3 -m gemmtune.cli bench-model --models hf:qwen3 --phases decode_b1 \
  --modes eager,eager_patch,eager_graph,eager_patch_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|rror|paths|decode|tuned|Warn" | tail -16
