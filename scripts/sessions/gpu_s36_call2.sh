#!/usr/bin/env bash
# Prepared at the end of session 35 for session 36 (~8 min; GPU only; no carry).
# #17's headline pair with the new default (GEMMTUNE_GEMV_HANDBACK_MIN_BYTES unset: no M=1
# hand-back in a graph with merged fused groups): Llama-1B decode b1, fused + patched + compile
# (cdt) against max-autotune, CUDA graphs, interleaved, profiled. Session 34 (inf): 1.092x.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 570 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
  --modes fuse_patch_compile_cdt_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|profile" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
