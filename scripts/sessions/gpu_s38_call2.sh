#!/usr/bin/env bash
# Prepared at the end of session 37 for session 38 (~9 min; GPU only; no carry). #17 with PDL on
# both sides through bench-model (session 37 measured it with scripts/exp_pdl_model.py: 1.051x):
# Llama-1B decode b1, fused + tuned once, served with -pdl twins and Inductor's PDL
# (fuse_patch_compile_pdl, its greedy tokens checked; and its graph twin), against max-autotune
# with Inductor's PDL and the same fused winners without PDL, CUDA graphs, interleaved, profiled.
# MODEL=qwen2-0.5b bash scripts/sessions/gpu_s38_call2.sh for the second model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
M=${MODEL:-llama-1b}
timeout 580 python3 -m gemmtune.cli bench-model --models $M --phases decode_b1 --profile \
  --modes fuse_patch_compile_pdl,fuse_patch_compile_graph,fuse_patch_compile_pdl_graph,max_autotune_pdl_graph \
  --out $OUT/bm_$M > $OUT/bm_$M.log 2>&1
echo "bench-model $M rc=$?"; grep -v "^E11\|^W11" $OUT/bm_$M.log | grep -E "interleaved|FAILED|rror|greedy|tokens" | tail -8
