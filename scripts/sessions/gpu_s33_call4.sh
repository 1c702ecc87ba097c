#!/usr/bin/env bash
# Session 33, call 4: where the Llama-1B decode b1 step's GPU time goes, fused + patched +
# compile with coordinate descent (1.046x max-autotune in session 32, 0.4% short of #17's
# 1.05x) against max-autotune, both replayed from CUDA graphs and profiled kernel by kernel
# (bench-model --profile). ~480 s (two compiles: ~140 s and ~280 s). GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 575 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
  --modes fuse_patch_compile_cdt_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|profile" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
