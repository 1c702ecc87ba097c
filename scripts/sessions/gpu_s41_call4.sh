#!/usr/bin/env bash
# Session 41 (~6 min; GPU only; no carry), right after gpu_s41_call3.sh: the two decode steps whose
# fused gate/up and LM head are wide enough for skinny_spec._WIDE_ONE_ROW (Llama-1B: 16384 x 2048 and
# 128256 x 2048; Qwen2-0.5B: 9728 x 896 and 151936 x 896), fused, patched, compiled and replayed
# with PDL, against max-autotune with PDL, interleaved.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
for model in llama-1b qwen2-0.5b; do
  timeout 280 python3 -m gemmtune.cli bench-model --models $model --phases decode_b1 --profile \
    --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph \
    --out $OUT/bm_$model > $OUT/bm_$model.log 2>&1
  echo "bench-model $model rc=$?"; grep -v "^E11\|^W11" $OUT/bm_$model.log | grep -E "interleaved|replay|FAILED|rror|first calls|tuning" | tail -12
done
