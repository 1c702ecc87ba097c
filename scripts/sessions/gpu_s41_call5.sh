#!/usr/bin/env bash
# Session 41 (~6-7 min; GPU only; no carry). #17's tuning-time target: tune_model now starts the
# tuning call's benchmark worker before its example passes (modeltune.early_worker), where the
# tuner used to wait 5.8 s for it after them (Qwen2-0.5B's fused decode shapes, call 5's log). The
# same two decode steps as gpu_s41_call4.sh, Qwen2 first; bench-model now reports the fused
# copy's tune call and its workers' start-up (fuse_tune_call_s, fuse_tune_startup_s).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
for model in qwen2-0.5b llama-1b; do
  timeout 250 python3 -m gemmtune.cli bench-model --models $model --phases decode_b1 \
    --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph \
    --out $OUT/bm_$model > $OUT/bm_$model.log 2>&1
  echo "bench-model $model rc=$?"; grep -v "^E11\|^W11" $OUT/bm_$model.log | grep -E "interleaved|FAILED|rror|first calls|own tuning" | tail -8
  grep -E "own tuning|first calls|interleaved" $OUT/bm_$model/bench-model.md | cut -c1-400
done
