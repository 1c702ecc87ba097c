#!/usr/bin/env bash
# Prepared at the end of session 32 for session 33 (call 2): #17's "patch + compile >= 1.0x
# max-autotune in every other phase" with the fused groups compiled (gemmtune.fuse_compile), which
# session 32 measured at decode only (b1 1.046x, b16 1.397x). Llama-1B prefill 1x512 from CUDA
# graphs, fused + patched + compile with coordinate descent against max-autotune, interleaved.
# ~480 s (max-autotune's compile ~280 s, the other ~140 s). GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 560 python3 -m gemmtune.cli bench-model --models llama-1b --phases prefill_b1_s512 \
  --modes fuse_patch_compile_cdt_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|first calls" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
