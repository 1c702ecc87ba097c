#!/usr/bin/env bash
# Prepared at the end of session 32 for session 33 (call 3): the Llama decode target (#17, >= 1.05x max-autotune; session 32
# measured 1.046x with coordinate descent) with the fused + patched model under max-autotune itself
# (bench-model's fuse_patch_max_autotune, new in session 32, never run). Two max-autotune compiles:
# ~560 s, so nothing else in this call. GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 590 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 \
  --modes fuse_patch_max_autotune_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|first calls" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
