#!/usr/bin/env bash
# Session 37: bench-model's new PDL mode on the GPU, the product path end to end: Llama-1B decode b1,
# fused + tuned once (--fast), fuse_patch_compile against fuse_patch_compile_pdl (the same winners,
# GEMV strips as -pdl twins, Inductor's PDL on), CUDA graphs, interleaved; logits checked.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 270 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 \
  --modes eager_graph,fuse_patch_compile_graph,fuse_patch_compile_pdl_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|FAILED|rror|logits" | tail -8
