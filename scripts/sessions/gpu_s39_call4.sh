#!/usr/bin/env bash
# Prepared at the end of session 38 for session 39 (~6-9 min; GPU only; no carry).
# #17 with PDL on both sides through bench-model, Llama-1B decode b1 (session 38's call 4 ran out
# of time in max-autotune's compile of the prompt pass; since then a decode phase's prompt runs
# uncompiled, so max-autotune tunes only the step's M = 1 GEMMs). max-autotune first, so that it
# finishes; each graph mode's interleaved verdict is written as soon as it is captured.
# Also: max-autotune's first_calls_s (its compile time for the step alone) for #17's tuning-time row.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 580 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
  --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph,fuse_patch_compile_graph \
  --out $OUT/bm_llama-1b > $OUT/bm_llama-1b.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm_llama-1b.log | grep -E "interleaved|replay|FAILED|rror|first calls" | tail -12
