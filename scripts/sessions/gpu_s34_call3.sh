#!/usr/bin/env bash
# Prepared at the end of session 33 (call 3, ~6 min; GPU only; no carry): #17's other prefill
# phase, Llama-1B prefill 8x128, fused + patched + compile with coordinate descent against
# max-autotune, from CUDA graphs, interleaved (session 33 measured prefill 1x512 at 1.391x).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 560 python3 -m gemmtune.cli bench-model --models llama-1b --phases prefill_b8_s128 \
  --modes fuse_patch_compile_cdt_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|first calls" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
