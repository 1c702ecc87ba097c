#!/usr/bin/env bash
# Session 26, call 5: what skinny's GEMV strips give a model's decode step. gemmtune bench-model
# on Llama-3.2-1B and Qwen2-0.5B configs (random weights, bf16), decode at batch 1 and 16, each
# step replayed from a CUDA graph (the GPU's time), eager against eager + patch (--fast), with
# the kernels profiled. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
timeout 500 python3 -m gemmtune.cli bench-model --models llama-1b,qwen2-0.5b --phases decode_b1,decode_b16 \
  --modes eager_graph,eager_patch_graph --profile --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|×|rror|tuned|decode" | tail -30
ls $OUT/bm
